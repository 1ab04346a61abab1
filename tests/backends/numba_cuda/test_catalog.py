"""Numba-CUDA joins the cross-backend checks through the simulator, and the catalog.

One primitive, two backends on ``cpu``: ``jax_raw`` (the reference) and
``numba_cuda`` (the catalog's GPU kernel, simulated) under eager, ``jit``, ``vmap``,
``jvp`` and ``grad`` (the primitive's rules). The catalog's ``numba_cuda`` kernels
are registered for ``gpu`` without importing ``numba.cuda``, compiled for ``sm_90``
by a slow test, and simulated here; they are never launched in CI.
"""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.catalog import csrmv_p, scaled_add_p
from polykernel.catalog._numba_cuda_kernels import csrmv_generator, scaled_add_generator

F32 = jnp.float32
BACKENDS = ["jax_raw", "numba_cuda"]


def _op():
    op = pk.XLACustomKernel("test_numba_cuda_backends.scaled_add")
    op.def_jax_raw_kernel(lambda outs, alpha, **kw: lambda x, y: alpha * x + y,
                          platform="cpu")  # fmt: skip
    op.def_kernel("numba_cuda", "cpu", scaled_add_generator)
    op.def_jvp_rule2(lambda t, x, y, *, alpha, **kw: [alpha * t],
                     lambda t, x, y, **kw: [t])  # fmt: skip
    return op


OP = _op()


def f(x, y, backend):
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return OP(x, y, outs=[spec], alpha=3.0, backend=backend)[0]


X = jnp.arange(5, dtype=F32) / 4
Y = jnp.ones(5, F32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_eager_and_jit_agree_with_the_reference(backend):
    want = 3 * np.asarray(X) + 1
    np.testing.assert_allclose(f(X, Y, backend), want, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(f, static_argnums=2)(X, Y, backend), want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_vmap_agrees_with_the_reference(backend):
    xs = jnp.stack([X, 2 * X])
    got = jax.vmap(lambda x: f(x, Y, backend))(xs)
    np.testing.assert_allclose(got, 3 * np.asarray(xs) + 1, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jvp_and_grad_use_the_primitives_rules(backend):
    _, tangent = jax.jvp(lambda x: f(x, Y, backend), (X,), (jnp.ones(5, F32),))
    np.testing.assert_allclose(tangent, np.full(5, 3.0))
    grad = jax.grad(lambda y: f(X, y, backend).sum())(Y)
    np.testing.assert_allclose(grad, np.ones(5))


@pytest.mark.parametrize("transpose", [False, True])
def test_catalog_csrmv_kernel_under_the_simulator(transpose):
    data = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    indices = np.array([0, 2, 1, 2], np.int32)
    indptr = np.array([0, 2, 3, 4], np.int32)
    dense = np.zeros((3, 3), np.float32)
    for r in range(3):
        dense[r, indices[indptr[r] : indptr[r + 1]]] = data[indptr[r] : indptr[r + 1]]
    v = np.array([1.0, -1.0, 0.5], np.float32)
    outs = (jax.ShapeDtypeStruct((3,), F32),)
    kernel = csrmv_generator(outs, shape=(3, 3), transpose=transpose)
    want = (dense.T if transpose else dense) @ v
    np.testing.assert_allclose(kernel(data, indices, indptr, v), want, rtol=1e-6)


def test_catalog_scaled_add_kernel_flattens_any_shape():
    outs = (jax.ShapeDtypeStruct((2, 3), F32),)
    x = jnp.arange(6, dtype=F32).reshape(2, 3)
    got = scaled_add_generator(outs, alpha=2.0)(x, x)
    np.testing.assert_allclose(got, 3 * np.asarray(x))


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_catalog_registers_numba_cuda_for_gpu_without_importing_it(run_env):
    assert "numba_cuda" in scaled_add_p.available_backends("gpu")
    assert "numba_cuda" in csrmv_p.available_backends("gpu")
    code = ("import sys, polykernel, polykernel.catalog\n"
            "print(any(m.startswith(('numba.cuda', 'numba_cuda')) for m in "
            "sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], env=run_env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "False"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["scaled_add", "csrmv", "csrmv_t"])
def test_catalog_gpu_kernels_compile_for_sm90(name):
    from polykernel.catalog import csrmv, scaled_add
    from polykernel.launcher import GRAPH_TARGET

    pk.config.set_compute_capability("90")
    try:
        if name == "scaled_add":
            args = (jnp.ones(8, F32), jnp.ones(8, F32))
            fn = lambda x, y: scaled_add(x, y, alpha=2.0)  # noqa: E731
        else:
            args = (jnp.ones(2, F32), jnp.zeros(2, jnp.int32),
                    jnp.array([0, 1, 2], jnp.int32), jnp.ones(3, F32))  # fmt: skip
            t = name == "csrmv_t"
            fn = lambda *a: csrmv(*a, shape=(2, 3), transpose=t)  # noqa: E731
        lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    finally:
        pk.config.set_compute_capability(None)
    assert f"@{GRAPH_TARGET}(" in lowered.as_text()


def test_info_rows_report_version_simulator_and_ptx_compiler():
    rows = pk.backends.lookup("numba_cuda").info_rows
    (gpu, cpu), (gpu_on, _) = rows(False), rows(True)
    assert gpu[:3] == ("numba_cuda", "gpu", False) and cpu[:3] == (
        "numba_cuda",
        "cpu",
        True,
    )
    assert gpu[3].startswith("numba-cuda 0.") and "no GPU visible to JAX" in gpu[3]
    assert "PTX compiles here (NVVM" in gpu[3] and "CUDA simulator" in cpu[3]
    assert gpu_on[2] is True and "native launch" in gpu_on[3]
