"""Reductions and a kernel with two outputs (mean and standard deviation).

A list of output structs makes the callable return a tuple of the same length.
Run: ``python examples/numba_reductions.py``
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np

from polykernel import numba_kernel

ONE = jax.ShapeDtypeStruct((1,), jnp.float32)


@numba.njit
def total(x, out):
    acc = 0.0
    for i in range(x.size):
        acc += x[i]
    out[0] = acc


@numba.njit
def maximum(x, out):
    best = x[0]
    for i in range(1, x.size):
        best = max(best, x[i])
    out[0] = best


@numba.njit
def mean_std(x, mean_out, std_out):
    n = x.size
    acc = 0.0
    for i in range(n):
        acc += x[i]
    mean = acc / n
    var = 0.0
    for i in range(n):
        var += (x[i] - mean) ** 2
    mean_out[0] = mean
    std_out[0] = np.sqrt(var / n)


def main() -> None:
    x = np.random.default_rng(1).uniform(0, 10, 10_000).astype(np.float32)
    s = numba_kernel(total, ONE)(x)
    np.testing.assert_allclose(s[0], x.astype(np.float64).sum(), rtol=1e-5)
    m = jax.jit(numba_kernel(maximum, ONE))(x)
    assert float(m[0]) == float(x.max())

    mean, std = numba_kernel(mean_std, [ONE, ONE])(x)
    np.testing.assert_allclose(mean[0], x.mean(dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(std[0], x.std(dtype=np.float64), rtol=1e-4)
    summary = f"sum {float(s[0]):.1f}, max {float(m[0]):.3f}, "
    summary += f"mean {float(mean[0]):.4f}, std {float(std[0]):.4f}"
    print(summary + ": match NumPy")


if __name__ == "__main__":
    main()
