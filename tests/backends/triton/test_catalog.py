"""The catalog's Triton kernels: registered for ``gpu``, checked in the interpreter.

Their semantics are checked here against ``jax_raw`` by running the same kernel
generators in Triton's interpreter (the CPU path of ``triton_kernel``); the slow test
compiles them for ``sm_90`` through the primitive's CUDA lowering. No launch.
"""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("triton")

import polykernel as pk
from polykernel.catalog import csrmv_p, scaled_add_p
from polykernel.catalog._support import random_csr
from polykernel.launcher import GRAPH_TARGET


def test_catalog_registers_triton_for_gpu_without_importing_triton():
    assert "triton" in scaled_add_p.available_backends("gpu")
    assert "triton" in csrmv_p.available_backends("gpu")
    code = "import sys, polykernel.catalog; print('triton' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True, env=dict(os.environ))  # fmt: skip
    assert out.stdout.strip() == "False"


def _generator(op, backend, platform):
    return op._table.entry(platform, backend).kernel_generator


def test_scaled_add_triton_kernel_matches_jax_raw_in_the_interpreter():
    n = 37
    x = jnp.linspace(-1, 1, n, dtype=jnp.float32)
    y = jnp.arange(n, dtype=jnp.float32)
    outs = (jax.ShapeDtypeStruct((n,), jnp.float32),)
    kernel = _generator(scaled_add_p, "triton", "gpu")(outs=outs, alpha=2.5)
    (got,) = jax.jit(kernel)(x, y)  # on CPU: Triton's interpreter
    np.testing.assert_allclose(got, 2.5 * np.asarray(x) + np.asarray(y), rtol=1e-6)


@pytest.mark.parametrize("transpose", [False, True])
def test_csrmv_triton_kernel_matches_jax_raw_in_the_interpreter(transpose):
    data, indices, indptr = random_csr(6, 5, 0.5, seed=3)
    shape = (6, 5)
    v = np.linspace(1, 2, shape[0] if transpose else shape[1], dtype=np.float32)
    n_out = shape[1] if transpose else shape[0]
    outs = (jax.ShapeDtypeStruct((n_out,), jnp.float32),)
    args = (data, indices, indptr, v)
    kernel = _generator(csrmv_p, "triton", "gpu")(
        outs=outs, shape=shape, transpose=transpose
    )
    (got,) = jax.jit(kernel)(*args)
    want = pk.catalog.csrmv(*args, shape=shape, transpose=transpose, backend="jax_raw")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_catalog_triton_kernels_compile_for_sm90_through_the_cuda_lowering():
    pk.config.set_compute_capability("9.0")
    try:
        x = jnp.ones(64, jnp.float32)
        add = jax.jit(lambda x, y: pk.catalog.scaled_add(x, y, alpha=2.0,
                                                         backend="triton"))  # fmt: skip
        text = add.trace(x, x).lower(lowering_platforms=("cuda",)).as_text()
        assert GRAPH_TARGET in text and "callback" not in text
        data, indices, indptr = random_csr(8, 8, 0.3, seed=1)
        for transpose in (False, True):
            mv = jax.jit(lambda d, i, p, v, t=transpose: pk.catalog.csrmv(
                d, i, p, v, shape=(8, 8), transpose=t, backend="triton"))  # fmt: skip
            lowered = mv.trace(data, indices, indptr, x[:8]).lower(
                lowering_platforms=("cuda",)
            )
            assert GRAPH_TARGET in lowered.as_text()
    finally:
        pk.config.set_compute_capability(None)
