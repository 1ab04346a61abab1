"""vmap of numba_kernel under every vmap_method equals a Python loop.

``expand_dims`` and ``broadcast_all`` hand the handler buffers with extra leading
(batch) dims; a handler that ignored them once crashed the process (brainevent B1).
So the checks run in a subprocess (a child of the test's jax zygote, which imports
Numba itself): a crash fails the test instead of killing pytest.
"""

from __future__ import annotations

import textwrap

import pytest
from subprocess_support import run_python

SCRIPT = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numba, numpy as np
    from polykernel.backends.numba import numba_kernel

    @numba.njit
    def matvec(a, x, out, scale):
        for i in range(a.shape[0]):
            acc = 0.0
            for j in range(a.shape[1]):
                acc += a[i, j] * x[j]
            out[i] = scale * acc

    @numba.njit
    def flat_sum(x, y, out):
        # flat loop over out.size: the pattern that corrupted memory in B1
        for i in range(out.size):
            out[i] = x[i] + y[i]

    rng = np.random.default_rng(0)
    A = jnp.asarray(rng.standard_normal((5, 3, 4)), jnp.float32)
    X = jnp.asarray(rng.standard_normal((5, 4)), jnp.float32)
    M = jnp.asarray(rng.standard_normal((2, 5, 4)), jnp.float32)
    for method in [None, "sequential", "sequential_unrolled", "expand_dims",
                   "broadcast_all"]:
        mv = numba_kernel(matvec, jax.ShapeDtypeStruct((3,), jnp.float32),
                          vmap_method=method)
        f = lambda a, x: mv(a, x, scale=np.float32(2.0))
        loop = lambda a, x, ax: np.stack([
            np.asarray(f(a[i] if ax[0] == 0 else a, x[i] if ax[1] == 0 else x))
            for i in range(5)])
        for axes in [(0, 0), (0, None), (None, 0)]:
            a = A if axes[0] == 0 else A[0]
            x = X if axes[1] == 0 else X[0]
            got = jax.jit(jax.vmap(f, in_axes=axes))(a, x)
            np.testing.assert_allclose(got, loop(a, x, axes), rtol=1e-5,
                                       err_msg=f"{method} {axes}")
        # nested vmap: batch dims (2, 5) on the matrix, (5,) on the vector
        got = jax.vmap(jax.vmap(f), in_axes=(0, None))(M[:, :, None, :].repeat(3, 2), X)
        want = np.stack([loop(M[k][:, None, :].repeat(3, 1), X, (0, 0))
                         for k in range(2)])
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{method} nested")
        fs = numba_kernel(flat_sum, jax.ShapeDtypeStruct((4,), jnp.float32),
                          vmap_method=method)
        got = jax.vmap(fs, in_axes=(0, None))(X, X[1])
        np.testing.assert_allclose(got, np.asarray(X) + np.asarray(X[1]))
        print("ok", method)
    """
)


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_every_vmap_method_equals_the_loop(run_env):
    out = run_python(code=SCRIPT, env=run_env, timeout=300, forked=True)
    assert out.count("ok ") == 5
