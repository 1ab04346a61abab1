"""Multi-threaded kernels with ``@numba.njit(parallel=True)`` and ``numba.prange``.

polykernel makes Numba use a thread-safe threading layer (omp or tbb) because XLA
may run the kernel from several threads. Run: ``python examples/numba_prange.py``
"""

from __future__ import annotations

import math
import time

import jax
import jax.numpy as jnp
import numba
import numpy as np

from polykernel import numba_kernel


@numba.njit
def add_serial(x, y, out):
    for i in range(out.size):
        out[i] = x[i] + y[i]


@numba.njit(parallel=True)
def add_parallel(x, y, out):
    for i in numba.prange(out.size):
        out[i] = x[i] + y[i]


@numba.njit(parallel=True)
def matvec_parallel(a, x, out):
    for i in numba.prange(a.shape[0]):  # one row per thread, inner loop serial
        acc = 0.0
        for j in range(a.shape[1]):
            acc += a[i, j] * x[j]
        out[i] = acc


@numba.njit(parallel=True)
def trace_decay(trace, spikes, out, tau_inv):
    decay = math.exp(-tau_inv)
    for i in numba.prange(out.size):
        out[i] = trace[i] * decay + spikes[i]


def _ms(fn, *args, reps=10):
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    for _ in range(reps):
        jax.block_until_ready(fn(*args))
    return (time.perf_counter() - t0) / reps * 1e3


def main() -> None:
    n = 1_000_000
    a = np.arange(n, dtype=np.float32)
    b = np.ones(n, np.float32)
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    serial = jax.jit(numba_kernel(add_serial, spec))
    parallel = jax.jit(numba_kernel(add_parallel, spec))
    np.testing.assert_allclose(parallel(a, b), a + b)
    print(f"N={n:,} on {numba.get_num_threads()} threads "
          f"({numba.threading_layer()} layer): serial {_ms(serial, a, b):.2f} ms, "
          f"parallel {_ms(parallel, a, b):.2f} ms")  # fmt: skip

    m = np.random.default_rng(0).standard_normal((300, 200)).astype(np.float32)
    v = np.random.default_rng(1).standard_normal(200).astype(np.float32)
    mv = numba_kernel(matvec_parallel, jax.ShapeDtypeStruct((300,), jnp.float32))
    np.testing.assert_allclose(mv(m, v), m @ v, rtol=1e-4, atol=1e-4)

    tr = np.random.default_rng(2).random(1000).astype(np.float32)
    sp = (np.random.default_rng(3).random(1000) < 0.1).astype(np.float32)
    decay = numba_kernel(trace_decay, jax.ShapeDtypeStruct((1000,), jnp.float32))
    got = decay(tr, sp, tau_inv=np.float32(0.05))
    np.testing.assert_allclose(got, tr * math.exp(-0.05) + sp, rtol=1e-6)
    print("parallel add, mat-vec and trace decay match NumPy")


if __name__ == "__main__":
    main()
