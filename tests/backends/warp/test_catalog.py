"""The catalog's Warp backends (cpu; gpu registered, built ahead of time only)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("warp")
from polykernel import catalog
from polykernel.catalog._support import random_csr

WITH_WARP = (catalog.scaled_add_p, catalog.lif_step_p, catalog.csrmv_p)


def test_warp_is_registered_for_cpu_and_gpu_where_it_makes_sense():
    for prim in WITH_WARP:
        assert "warp" in prim.available_backends("cpu")
        assert "warp" in prim.available_backends("gpu")
        assert prim.defaults["cpu"] != "warp"  # Numba stays the CPU default
    assert "warp" not in catalog.event_csrmv_p.available_backends("cpu")


def test_scaled_add_and_lif_step_agree_with_numpy():
    x = np.linspace(-1, 1, 37, dtype=np.float32)
    y = np.arange(37, dtype=np.float32)
    got = jax.jit(lambda x, y: catalog.scaled_add(x, y, alpha=3.0, backend="warp"))
    np.testing.assert_allclose(got(x, y), 3.0 * x + y, rtol=1e-6)
    rng = np.random.default_rng(3)
    v = rng.uniform(-75, -50, 101).astype(np.float32)
    i_ext = rng.uniform(0, 300, 101).astype(np.float32)
    v_next, spikes = catalog.lif_step(v, i_ext, backend="warp")
    ref_v, ref_s = catalog.lif_step(v, i_ext, backend="jax_raw")
    np.testing.assert_array_equal(spikes, ref_s)
    np.testing.assert_allclose(v_next, ref_v, rtol=1e-6)


@pytest.mark.parametrize("transpose", [False, True])
def test_csrmv_matches_scipy_and_differentiates(transpose):
    data, indices, indptr = random_csr(60, 40, 0.2, seed=7)
    A = sp.csr_matrix((data, indices, indptr), shape=(60, 40))
    v = np.random.default_rng(0).random(60 if transpose else 40).astype(np.float32)

    def f(d, v):
        return catalog.csrmv(d, indices, indptr, v, shape=(60, 40),
                             transpose=transpose, backend="warp")  # fmt: skip

    expected = A.T @ v if transpose else A @ v
    np.testing.assert_allclose(jax.jit(f)(data, v), expected, rtol=1e-5, atol=1e-6)
    grad = jax.grad(lambda v: jnp.sum(f(data, v) ** 2))(v)
    dense = A.toarray().T if transpose else A.toarray()
    np.testing.assert_allclose(grad, 2 * dense.T @ (dense @ v), rtol=1e-4)
    vs = np.stack([v, 2 * v])
    batched = jax.vmap(lambda v: f(data, v))(vs)
    np.testing.assert_allclose(batched, np.stack([expected, 2 * expected]), rtol=1e-5)
