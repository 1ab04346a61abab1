"""Kernels the export-revival children share (a module, so a new process can import
it by name): a Numba-CUDA kernel and a ``numba_cuda_callable`` function."""

from __future__ import annotations

from numba import cuda


@cuda.jit
def add_one(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 1


def add_one_twice(x, out, stream):
    """A ``numba_cuda_callable`` function: two launches on XLA's stream."""
    add_one[1, 32, stream](x, out)
    add_one[1, 32, stream](out, out)
