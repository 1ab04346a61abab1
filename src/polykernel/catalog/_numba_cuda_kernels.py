"""Numba-CUDA kernels of the catalog (``scaled_add``, ``csrmv``), for the GPU.

Registered for ``gpu`` by their primitives when numba-cuda is installed (found
without importing it); ``numba.cuda`` is imported only when a generator first runs.
On a machine with a GPU they are compiled ahead and launched by the native launcher;
here they are compiled by a slow test and run through the simulator, never launched.

Kernels take arrays only: ``alpha`` is a one-element input (one compiled kernel for
every value), and the transposed product accumulates with atomics into a zeroed
buffer that aliases its output (XLA's outputs start uninitialised).
"""

from __future__ import annotations

import functools
from typing import Any, TypedDict

__all__ = ["csrmv_generator", "scaled_add_generator"]

_TPB = 256


class _Launch(TypedDict):
    launch_dims: int
    threads_per_block: int


def _launch(n: int, tpb: int = _TPB) -> _Launch:
    """One thread per item in blocks of ``tpb`` (tuned per GPU); small problems get
    one small block (cheap to simulate)."""
    return {"launch_dims": n, "threads_per_block": min(tpb, 32 * max(1, -(-n // 32)))}


@functools.cache
def _kernels() -> dict[str, Any]:
    # Module globals, not locals: the simulator swaps the module's ``cuda`` name.
    global cuda, float32
    from ..backends.numba_cuda.compile import require_numba_cuda

    cuda = require_numba_cuda("polykernel.catalog")
    from numba import float32

    @cuda.jit
    def scaled_add(x, y, alpha, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = alpha[0] * x[i] + y[i]

    @cuda.jit
    def csr_gather(data, indices, indptr, v, out):
        row = cuda.grid(1)
        if row < out.size:
            acc = float32(0)
            for j in range(indptr[row], indptr[row + 1]):
                acc += data[j] * v[indices[j]]
            out[row] = acc

    @cuda.jit
    def csr_scatter(data, indices, indptr, v, zeros, out):
        row = cuda.grid(1)
        if row < indptr.size - 1:
            vi = v[row]
            for j in range(indptr[row], indptr[row + 1]):
                cuda.atomic.add(out, indices[j], data[j] * vi)

    return {"scaled_add": scaled_add, "gather": csr_gather, "scatter": csr_scatter}


def scaled_add_generator(
    outs: Any, alpha: float, threads_per_block: int = _TPB, **kwargs: Any
) -> Any:
    """``alpha * x + y``, one thread per element (any shape, flattened)."""
    import jax
    import jax.numpy as jnp

    from ..backends.numba_cuda import numba_cuda_kernel

    shape, n = outs[0].shape, outs[0].size
    flat = jax.ShapeDtypeStruct((n,), outs[0].dtype)
    call = numba_cuda_kernel(_kernels()["scaled_add"], flat,
                             **_launch(n, threads_per_block))  # fmt: skip

    def kernel(x, y):
        a = jnp.full((1,), alpha, jnp.float32)
        return call(x.reshape(-1), y.reshape(-1), a).reshape(shape)

    return kernel


def csrmv_generator(outs: Any, shape: tuple[int, int], transpose: bool,
                    row_window: bool = False, threads_per_block: int = _TPB,
                    **kwargs: Any) -> Any:  # fmt: skip
    """``A @ v`` (a thread per row) or ``A.T @ v`` (a thread per row, atomics)."""
    import jax.numpy as jnp

    from ..backends.numba_cuda import numba_cuda_kernel

    if row_window:
        raise NotImplementedError(
            "csrmv: the numba_cuda kernel does not take row windows (sharded "
            "calls); use backend='jax_raw' under sharding on the GPU."
        )
    launch = _launch(shape[0], threads_per_block)
    if not transpose:
        return numba_cuda_kernel(_kernels()["gather"], outs[0], **launch)
    call = numba_cuda_kernel(_kernels()["scatter"], outs[0],
                             input_output_aliases={4: 0}, **launch)  # fmt: skip
    return lambda data, indices, indptr, v: call(
        data, indices, indptr, v, jnp.zeros(outs[0].shape, outs[0].dtype)
    )
