"""The curated catalog: every backend of every primitive agrees with NumPy/SciPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from grad_checks import assert_grads_match

from polykernel import catalog
from polykernel.catalog._support import random_csr

BACKENDS = ["jax_raw", "numba", "cuda_raw"]


@pytest.fixture(scope="module")
def csr():
    data, indices, indptr = random_csr(60, 40, 0.2, seed=7)
    return data, indices, indptr, sp.csr_matrix((data, indices, indptr), shape=(60, 40))


@pytest.mark.parametrize("backend", BACKENDS)
def test_scaled_add(backend):
    x = np.linspace(-1, 1, 37, dtype=np.float32)
    y = np.arange(37, dtype=np.float32)
    got = jax.jit(lambda x, y: catalog.scaled_add(x, y, alpha=3.0, backend=backend))(
        x, y
    )
    np.testing.assert_allclose(got, 3.0 * x + y, rtol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("transpose", [False, True])
def test_csrmv_matches_scipy(csr, backend, transpose):
    data, indices, indptr, A = csr
    v = np.random.default_rng(0).random(60 if transpose else 40).astype(np.float32)
    f = jax.jit(
        lambda *a: catalog.csrmv(
            *a, shape=(60, 40), transpose=transpose, backend=backend
        )
    )
    expected = A.T @ v if transpose else A @ v
    np.testing.assert_allclose(
        f(data, indices, indptr, v), expected, rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_csrmv_grad_and_jvp(csr, backend):
    data, indices, indptr, A = csr
    v = np.random.default_rng(1).random(40).astype(np.float32)

    def loss(d, v):
        y = catalog.csrmv(d, indices, indptr, v, shape=(60, 40), backend=backend)
        return jnp.sum(jnp.sin(y))

    def reference(d, v):
        rows = np.repeat(np.arange(60), np.diff(indptr))
        dense = jnp.zeros((60, 40)).at[rows, indices].add(d)
        return jnp.sum(jnp.sin(dense @ v))

    assert_grads_match(loss, reference, (data, v), rtol=1e-4, atol=1e-5)
    tangent = np.ones(40, np.float32)
    _, tan = jax.jvp(
        lambda v: catalog.csrmv(
            data, indices, indptr, v, shape=(60, 40), backend=backend
        ),
        [v],
        [tangent],
    )
    np.testing.assert_allclose(tan, A @ tangent, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_event_csrmv(csr, backend):
    data, indices, indptr, A = csr
    spikes = np.random.default_rng(2).random(60) < 0.3
    got = jax.jit(lambda *a: catalog.event_csrmv(*a, n_post=40, backend=backend))(
        data, indices, indptr, spikes
    )
    np.testing.assert_allclose(
        got, A.T @ spikes.astype(np.float32), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_lif_step(backend):
    rng = np.random.default_rng(3)
    v = rng.uniform(-75, -50, 101).astype(np.float32)
    i_ext = rng.uniform(0, 300, 101).astype(np.float32)
    v_next, spikes = jax.jit(lambda v, i: catalog.lif_step(v, i, backend=backend))(
        v, i_ext
    )
    candidate = v + np.float32(0.1) * (
        -(v + np.float32(70.0)) * np.float32(0.05) + i_ext
    )
    np.testing.assert_array_equal(spikes, candidate >= -55.0)
    np.testing.assert_allclose(
        v_next, np.where(candidate >= -55.0, -70.0, candidate), rtol=1e-6
    )
    assert spikes.dtype == np.bool_
    assert 0 < spikes.sum() < 101


def test_vmap_of_catalog_primitive(csr):
    data, indices, indptr, A = csr
    vs = np.random.default_rng(4).random((3, 40)).astype(np.float32)
    got = jax.vmap(lambda v: catalog.csrmv(data, indices, indptr, v, shape=(60, 40)))(
        vs
    )
    np.testing.assert_allclose(got, (A @ vs.T).T, rtol=1e-5, atol=1e-6)


def test_every_primitive_has_call_benchmark_data_and_tags():
    for prim in catalog.PRIMITIVES:
        assert prim.call_function is not None
        assert prim.benchmark_data_function is not None
        assert prim.tags
        assert set(BACKENDS) <= set(prim.available_backends("cpu"))  # (+ warp, ...)
