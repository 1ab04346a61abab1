"""Eight threads calling jitted primitives at once get the right answers.

Covers a fresh ``numba_kernel`` whose first call (handler build and registration)
happens in all threads at the same moment, and the catalog primitives on their
Numba and C++ backends called in a loop with per-thread data.
"""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import scipy.sparse as sp

import polykernel as pk
from polykernel import catalog
from polykernel.catalog._support import has_cxx, random_csr

N_THREADS = 8
BACKENDS = ["numba"] + (["cuda_raw"] if has_cxx() else [])


def _in_threads(work) -> list:
    """Run ``work(i)`` in 8 threads started together; re-raise the first error."""
    barrier = threading.Barrier(N_THREADS)
    results: list = [None] * N_THREADS
    errors: list = []

    def run(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as err:  # reported below, in the test's thread
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(N_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def test_first_calls_of_a_new_kernel_from_eight_threads():
    @numba.njit
    def cube_plus(x, out, c):
        for i in range(out.size):
            out[i] = x[i] * x[i] * x[i] + c

    spec = jax.ShapeDtypeStruct((64,), jnp.float32)
    kernel = pk.numba_kernel(cube_plus, spec)
    f = jax.jit(lambda x, c: kernel(x, c=c), static_argnums=1)

    def work(i):
        x = jnp.linspace(-1, 1, 64, dtype=jnp.float32) + i
        return i, np.asarray(f(x, float(i))), np.asarray(x)

    for i, got, x in _in_threads(work):
        np.testing.assert_allclose(got, x**3 + i, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_catalog_primitives_from_eight_threads(backend):
    data, indices, indptr = random_csr(50, 30, 0.2, seed=3)
    dense = sp.csr_matrix((data, indices, indptr), shape=(50, 30))
    csrmv = jax.jit(
        lambda v: catalog.csrmv(data, indices, indptr, v, shape=(50, 30),
                                backend=backend)
    )  # fmt: skip
    add = jax.jit(lambda x, y: catalog.scaled_add(x, y, alpha=3.0, backend=backend))
    lif = jax.jit(lambda v, i: catalog.lif_step(v, i, backend=backend))

    def work(i):
        rng = np.random.default_rng(i)
        for _ in range(20):
            v = rng.standard_normal(30).astype(np.float32)
            np.testing.assert_allclose(csrmv(v), dense @ v, rtol=1e-4, atol=1e-5)
            x, y = rng.standard_normal((2, 100)).astype(np.float32)
            np.testing.assert_allclose(add(x, y), 3 * x + y, rtol=1e-6)
            _, spikes = lif(np.full(16, -56.0, np.float32),
                            np.full(16, 20.0 * (i % 2), np.float32))  # fmt: skip
            assert bool(np.all(np.asarray(spikes) == bool(i % 2)))
        return True

    assert all(_in_threads(work))


def test_vmap_of_a_numba_primitive_from_eight_threads():
    f = jax.jit(jax.vmap(lambda x, y: catalog.scaled_add(x, y, alpha=2.0,
                                                         backend="numba")))  # fmt: skip

    def work(i):
        x = np.arange(12, dtype=np.float32).reshape(3, 4) * (i + 1)
        y = np.ones((3, 4), np.float32)
        np.testing.assert_allclose(f(x, y), 2 * x + y)
        return True

    assert all(_in_threads(work))
