"""What the multi-controller tests run: one module every process imports.

``row_affine`` is a Numba-backed primitive with ``def_batch_partitioning``:
``out[b, j] = x[b, j] * w[j] + sum(x[b, :])``, rows independent, ``w`` replicated.
``csr_problem`` gives a CSR matrix and vectors for the catalog's ``csrmv``;
``expected`` the NumPy results.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np

import polykernel as pk

ROWS, COLS = 8, 6  # row_affine's global shape: 4 devices get 2 rows each
CSR_SHAPE = (40, 32)  # csrmv's matrix: 40 rows split over 4 devices


@numba.njit
def _row_affine(x, w, out):
    for b in range(x.shape[0]):
        total = 0.0
        for j in range(x.shape[1]):
            total += x[b, j]
        for j in range(x.shape[1]):
            out[b, j] = x[b, j] * w[j] + total


row_affine = pk.XLACustomKernel("multiprocess.row_affine")
row_affine.def_numba_kernel(
    lambda outs, **kw: pk.numba_kernel(_row_affine, outs[0]), asdefault=True
)
row_affine.def_batch_partitioning(replicated_inputs=(1,))


def row_affine_inputs() -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(ROWS * COLS, dtype=np.float32).reshape(ROWS, COLS) / 7
    w = np.linspace(-1, 2, COLS, dtype=np.float32)
    return x, w


def row_affine_call(x, w):
    return row_affine(x, w, outs=jax.ShapeDtypeStruct((ROWS, COLS), jnp.float32))


def row_affine_block(x, w):
    """``row_affine`` on one device's rows (inside ``shard_map``)."""
    return row_affine(x, w, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


def row_affine_expected(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x * w + x.sum(axis=1, keepdims=True)


def csr_problem() -> tuple[tuple[np.ndarray, ...], np.ndarray, np.ndarray]:
    """``((data, indices, indptr), v for A @ v, u for A.T @ u)``."""
    from polykernel.catalog._support import random_csr

    rows, cols = CSR_SHAPE
    csr = random_csr(rows, cols, 0.3, seed=3)
    rng = np.random.default_rng(4)
    return csr, rng.random(cols).astype(np.float32), rng.random(rows).astype(np.float32)


def dense(csr: tuple[np.ndarray, ...]) -> np.ndarray:
    data, indices, indptr = csr
    a = np.zeros(CSR_SHAPE, np.float64)
    for r in range(CSR_SHAPE[0]):
        for k in range(indptr[r], indptr[r + 1]):
            a[r, indices[k]] += data[k]
    return a
