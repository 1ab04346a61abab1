"""Triton kernels of the catalog (``scaled_add``, ``csrmv``), registered for ``gpu``.

This module imports Triton, so the catalog imports it only inside its kernel
generators: defining the primitives never imports Triton. On a GPU the kernels are
compiled for the device and launched by polykernel's native launcher; here they are
compiled for ``sm_90`` and run in Triton's interpreter by the tests
(``tests/backends/triton/test_catalog.py``), never launched.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import triton
import triton.language as tl

from ..backends.triton import triton_kernel
from ._support import row_ids, window_row_ids

__all__ = ["csrmv_triton", "scaled_add_triton"]

_BLOCK = 1024  # elements per program of scaled_add (4 warps, 8 floats per thread)
_NNZ_BLOCK = 32  # stored entries a csrmv program reads per step (one warp's worth)


@triton.jit
def _scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


@triton.jit
def _csr_gather(data_ptr, index_ptr, ptr_ptr, v_ptr, out_ptr, BLOCK: tl.constexpr):
    # One program per output row: out[row] = sum_k data[k] * v[index[k]].
    row = tl.program_id(0)
    start = tl.load(ptr_ptr + row)
    end = tl.load(ptr_ptr + row + 1)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(start, end, BLOCK):
        offs = k + tl.arange(0, BLOCK)
        mask = offs < end
        d = tl.load(data_ptr + offs, mask=mask, other=0.0)
        j = tl.load(index_ptr + offs, mask=mask, other=0)
        acc += d * tl.load(v_ptr + j, mask=mask, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def scaled_add_triton(
    outs: Any, alpha: float, block: int = _BLOCK, num_warps: int = 4
) -> Any:
    """``alpha * x + y`` as one Triton launch (``outs``: the primitive's outs), in
    programs of ``block`` elements (tuned per GPU and size)."""
    n = int(outs[0].size)
    grid = (triton.cdiv(n, block),)
    kernel = triton_kernel(_scaled_add, outs[0], grid=grid, num_warps=num_warps,
                           BLOCK=block)  # fmt: skip
    return lambda x, y: [kernel(x, y, n=n, alpha=float(alpha))]


def csrmv_triton(
    outs: Any,
    shape: tuple[int, int],
    transpose: bool,
    row_window: bool = False,
    block: int = _NNZ_BLOCK,
    num_warps: int = 1,
) -> Any:
    """``A @ v`` (a row gather), or ``A.T @ v`` through the same gather on CSC.

    The transpose gathers too instead of scattering with atomics: the output
    buffer a launch gets is uninitialised and adds in a data-dependent order would
    make the result non-deterministic. The CSC form is built with ``jnp``.
    """
    n_out = int(outs[0].shape[0])
    kernel = triton_kernel(_csr_gather, outs[0], grid=(n_out,), num_warps=num_warps,
                           BLOCK=block)  # fmt: skip
    if not transpose:
        # Absolute offsets: a row window of indptr works unchanged.
        return lambda data, indices, indptr, v: [kernel(data, indices, indptr, v)]

    def transposed(data: Any, indices: Any, indptr: Any, v: Any) -> list[Any]:
        nnz = data.shape[0]
        if row_window:
            rows, inside = window_row_ids(indptr, nnz)
            data = jnp.where(inside, data, jnp.zeros_like(data))
        else:
            rows = row_ids(indptr, nnz)
        order = jnp.argsort(indices, stable=True)
        columns = indices[order]
        col_ptr = jnp.searchsorted(
            columns, jnp.arange(n_out + 1, dtype=columns.dtype), side="left"
        ).astype(jnp.int32)
        return [kernel(data[order], rows[order], col_ptr, v)]

    return transposed
