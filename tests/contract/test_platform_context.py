"""Kernels learn which platform their primitive is being lowered for."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import polykernel as pk
from polykernel.contract.platform_context import (
    current_lowering_platform,
    lowering_for,
    traced_for_gpu,
)


def test_outside_a_primitive_the_default_device_decides():
    assert current_lowering_platform() is None
    assert traced_for_gpu() is False  # CPU-only test run
    with lowering_for("gpu"):
        assert current_lowering_platform() == "gpu" and traced_for_gpu() is True
    assert current_lowering_platform() is None


def test_a_primitive_sets_the_platform_while_its_kernel_is_traced():
    seen = []

    def generator(outs, **kw):
        def kernel(x):
            seen.append(current_lowering_platform())
            return x + 1

        return kernel

    op = pk.XLACustomKernel("test_lowering_platform.inc")
    op.def_kernel("jax_raw", "cpu", generator)
    y = jax.jit(lambda x: op(x, outs=[jax.ShapeDtypeStruct((2,), jnp.float32)]))(
        jnp.zeros(2, jnp.float32)
    )
    assert seen == ["cpu"] and y[0].tolist() == [1.0, 1.0]
