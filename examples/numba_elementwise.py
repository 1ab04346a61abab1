"""Element-wise Numba kernels as JAX operations: add, ReLU, a dense mat-vec.

Each kernel takes its inputs, then its outputs, and fills the outputs in place.
``numba_kernel`` turns it into a JAX callable (eager and under ``jax.jit``).
Run: ``python examples/numba_elementwise.py``
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np

from polykernel import numba_kernel


@numba.njit
def add(x, y, out):
    for i in range(out.size):
        out[i] = x[i] + y[i]


@numba.njit
def relu(x, out):
    for i in range(out.size):
        out[i] = x[i] if x[i] > 0 else 0


@numba.njit
def matvec(a, x, out):
    rows, cols = a.shape
    for i in range(rows):
        acc = a.dtype.type(0)
        for j in range(cols):
            acc += a[i, j] * x[j]
        out[i] = acc


def main() -> None:
    n = 512
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 3.0, np.float32)
    add_fn = numba_kernel(add, jax.ShapeDtypeStruct((n,), jnp.float32))
    np.testing.assert_allclose(add_fn(a, b), a + b)

    x = np.linspace(-3, 3, n, dtype=np.float32)
    relu_fn = numba_kernel(relu, jax.ShapeDtypeStruct((n,), jnp.float32))
    np.testing.assert_allclose(relu_fn(x), np.maximum(x, 0))

    m = np.random.default_rng(0).standard_normal((64, n)).astype(np.float32)
    mv_fn = numba_kernel(matvec, jax.ShapeDtypeStruct((64,), jnp.float32))
    np.testing.assert_allclose(mv_fn(m, x), m @ x, rtol=1e-4, atol=1e-4)

    @jax.jit
    def pipeline(u, v):  # a Numba kernel mixed with ordinary JAX operations
        s = add_fn(u, v)
        return jnp.sin(s) * jnp.sqrt(jnp.abs(s) + 1.0)

    for scale in (1.0, 2.0):  # the second call reuses the compiled program
        got = pipeline(a * scale, b)
        s = a * scale + b
        np.testing.assert_allclose(got, np.sin(s) * np.sqrt(np.abs(s) + 1), rtol=1e-5)
    print("add, relu, matvec and the jitted pipeline match NumPy")


if __name__ == "__main__":
    main()
