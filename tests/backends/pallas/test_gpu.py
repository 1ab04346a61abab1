"""Pallas on the GPU: lowered for CUDA here (``slow``), launched by ``make test-gpu``.

Without a GPU, the lowering tests check that the primitive's ``'gpu'`` Pallas kernel
becomes a Triton custom call in the StableHLO for ``cuda``; nothing is compiled to a
cubin or launched. The ``gpu`` tests launch it (on a machine with a GPU only).
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.backends.pallas import TRITON_TARGET, lower_for_cuda, lowering_context

F32 = jnp.float32
BLOCK = 1024

pytestmark = [
    # JAX 0.11 deprecates Pallas' Triton backend (it warns at every lowering); it
    # is the GPU path that lowers without a GPU and the CUDA plugin, so it stays.
    pytest.mark.filterwarnings(
        "ignore:The Pallas Triton backend is deprecated:DeprecationWarning"
    ),
    pytest.mark.skipif(
        pk._jax_compat.pallas_compiler_params_class("gpu") is None,
        reason="this JAX has no Pallas Triton backend (jax.experimental.pallas.triton)",
    ),
]


def add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def add_generator(outs, **kw):
    pl = pytest.importorskip("jax.experimental.pallas")
    (n,) = outs[0].shape
    block = min(BLOCK, n)
    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pk.pallas_kernel(
        add_body,
        outs[0],
        grid=(pl.cdiv(n, block),),
        in_specs=[spec, spec],
        out_specs=spec,
        num_warps=4,
    )


def make_add(name):
    op = pk.XLACustomKernel(name)
    op.def_pallas_kernel("cpu", add_generator)
    op.def_pallas_kernel("gpu", add_generator)
    op.def_jvp_rule2(lambda t, x, y, **kw: [t], lambda t, x, y, **kw: [t])
    return op


def add(op, x, y):
    return op(x, y, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


@pytest.mark.slow
def test_primitive_lowers_for_cuda_to_a_triton_kernel():
    op = make_add("test.pallas_gpu.lower")
    spec = jax.ShapeDtypeStruct((1 << 16,), F32)
    text = lower_for_cuda(lambda x, y: add(op, x, y), spec, spec)
    calls = [line for line in text.splitlines() if "stablehlo.custom_call" in line]
    assert len(calls) == 1 and f"@{TRITON_TARGET}" in calls[0]
    assert 'name = "add_body"' in calls[0]  # the Pallas kernel, as Triton IR
    assert "grid_x = 64 : i32" in calls[0] and "num_warps = 4 : i32" in calls[0]


@pytest.mark.slow
def test_plain_jax_export_for_cuda_needs_no_gpu():
    # The primitive's lowering rule gives Pallas an abstract H100 (AOT_GPU) when no
    # GPU is visible: JAX 0.11+ would otherwise fail to pick a compute capability.
    op = make_add("test.pallas_gpu.plain_export")
    op.def_batch_partitioning()  # a primitive that needs devices to lower
    spec = jax.ShapeDtypeStruct((4096,), F32)
    check = jax.export.DisabledSafetyCheck.custom_call(TRITON_TARGET)
    export = jax.export.export(
        jax.jit(lambda x, y: add(op, x, y)),
        platforms=("cuda",),
        disabled_checks=[check],
    )
    exported = export(spec, spec)
    assert exported.mlir_module().count(f"@{TRITON_TARGET}") == 1
    assert lowering_context("cpu").__class__ is contextlib.nullcontext


@pytest.mark.slow
def test_grad_of_the_primitive_lowers_for_cuda():
    op = make_add("test.pallas_gpu.grad")
    spec = jax.ShapeDtypeStruct((4096,), F32)
    text = lower_for_cuda(
        jax.grad(lambda x, y: jnp.sum(add(op, x, y) ** 2)), spec, spec
    )
    assert text.count(f"@{TRITON_TARGET}") == 1  # forward kernel; tangents are jnp


@pytest.mark.slow
def test_one_export_carries_cpu_interpret_and_cuda_triton():
    op = make_add("test.pallas_gpu.multi")
    spec = jax.ShapeDtypeStruct((2048,), F32)
    check = jax.export.DisabledSafetyCheck.custom_call(TRITON_TARGET)
    with pk._jax_compat.abstract_gpu_target():
        exported = jax.export.export(
            jax.jit(lambda x, y: add(op, x, y)),
            platforms=("cpu", "cuda"),
            disabled_checks=[check],
        )(spec, spec)
    assert exported.platforms == ("cpu", "cuda")
    assert f"@{TRITON_TARGET}" in exported.mlir_module()
    x = jnp.arange(2048, dtype=F32)
    np.testing.assert_allclose(exported.call(x, x), 2 * np.asarray(x))


@pytest.mark.gpu
def test_launch_2_pow_24_floats_matches_jnp_add():
    gpu = jax.devices("gpu")[0]
    op = make_add("test.pallas_gpu.launch")
    n = 1 << 24
    rng = np.random.default_rng(0)
    x, y = (
        jax.device_put(rng.standard_normal(n).astype(np.float32), gpu) for _ in "xy"
    )
    out = jax.jit(lambda a, b: add(op, a, b))(x, y)
    assert out.devices() == {gpu}
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) + np.asarray(y))
    # Its bandwidth (0.96x jnp.add on an H200) is benchmarks/bench_gpu.py's to
    # measure: a timed assertion here would race the other tests for the GPU.


@pytest.mark.gpu
def test_grad_runs_on_the_gpu():
    gpu = jax.devices("gpu")[0]
    op = make_add("test.pallas_gpu.grad_launch")
    x = jax.device_put(jnp.linspace(-1, 1, 4096, dtype=F32), gpu)
    gx = jax.jit(jax.grad(lambda a: jnp.sum(add(op, a, a) ** 2)))(x)
    np.testing.assert_allclose(np.asarray(gx), 8 * np.asarray(x), rtol=1e-6)
