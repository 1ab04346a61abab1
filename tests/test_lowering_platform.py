"""Backends can ask which platform a primitive is being lowered for."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import polykernel as pk
from polykernel.lowering_platform import lowering_for, lowering_platform


def test_the_platform_is_visible_to_generators_and_reset_after():
    seen = []

    def gen(outs, **kw):
        seen.append(lowering_platform())
        return lambda x: x + 1

    op = pk.XLACustomKernel("test_lowering_platform.inc")
    op.def_kernel("jax_raw", "cpu", gen)
    x = jnp.ones(3)
    assert jax.jit(lambda x: op(x, outs=[x])[0])(x).tolist() == [2.0] * 3
    assert seen == ["cpu"]
    assert lowering_platform() is None


def test_lowering_for_nests_and_restores():
    with lowering_for("gpu"):
        with lowering_for("cpu"):
            assert lowering_platform() == "cpu"
        assert lowering_platform() == "gpu"
    assert lowering_platform() is None
