"""Numba-CUDA kernels several tests launch (on the CUDA simulator without a GPU)."""

from __future__ import annotations

from numba import cuda


@cuda.jit
def double(x, out):
    """``out = 2 * x``, one thread per element."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]
