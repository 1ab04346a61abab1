"""What the catalog's primitives share: backend availability, registration and test
data."""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ..core.primitive import XLACustomKernel

__all__ = [
    "def_cpu_kernels",
    "def_gpu_kernels",
    "has_cxx",
    "has_numba",
    "has_numba_cuda",
    "has_pallas",
    "has_triton",
    "has_warp",
    "pallas_elementwise",
    "random_csr",
    "row_ids",
    "window_row_ids",
]

#: Elements per Pallas program on the GPU (a multiple of the 128-thread warp group).
PALLAS_BLOCK = 1024


@functools.cache
def has_numba() -> bool:
    """True when numba can be imported (the ``numba`` backend is registered)."""
    return importlib.util.find_spec("numba") is not None


@functools.cache
def has_triton() -> bool:
    """True when Triton is installed (found, not imported: ``triton`` on gpu)."""
    return importlib.util.find_spec("triton") is not None


def has_numba_cuda() -> bool:
    """True when numba-cuda is installed (``numba_cuda`` kernels are registered)."""
    return importlib.util.find_spec("numba_cuda") is not None


@functools.cache
def has_warp() -> bool:
    """True when warp-lang and llvmlite are installed (the ``warp`` backend is
    registered); found without importing either."""
    return all(importlib.util.find_spec(m) is not None for m in ("warp", "llvmlite"))


@functools.cache
def has_cxx() -> bool:
    """True when the native loader finds a host C++ compiler (``cuda_raw`` on cpu)."""
    from ..errors import ToolchainError
    from ..native.toolchain import find_host_compiler

    try:
        find_host_compiler()
    except ToolchainError:
        return False
    return True


@functools.cache
def has_pallas() -> bool:
    """True when ``jax.experimental.pallas`` exists (the ``pallas`` backend)."""
    return importlib.util.find_spec("jax.experimental.pallas") is not None


#: Tuned launch parameters by backend name (``docs/tuning.md``): the candidate values
#: of each generator keyword, the first the default.
Tune = Mapping[str, Mapping[str, Sequence[Any]]]


def def_cpu_kernels(
    primitive: XLACustomKernel,
    jax_raw: Any,
    numba: Any,
    cpp: Any,
    tune: Tune | None = None,
) -> None:
    """Register the CPU kernels of a catalog primitive, each where it can run.

    ``jax_raw`` is the reference, ``numba`` the default where Numba is installed,
    ``cpp`` the ``cuda_raw`` kernel built with the host C++ compiler.
    """
    tune = tune or {}
    primitive.def_jax_raw_kernel(jax_raw, platform="cpu")
    if has_numba():
        primitive.def_numba_kernel(numba, asdefault=True, tune=tune.get("numba"))
    if has_cxx():
        primitive.def_cuda_raw_kernel(cpp, platform="cpu", tune=tune.get("cuda_raw"))


def def_gpu_kernels(
    primitive: XLACustomKernel,
    jax_raw: Any,
    tune: Tune | None = None,
    *,
    numba_cuda: Any = None,
    triton: Any = None,
    pallas: Any = None,
) -> None:
    """Register the GPU kernels of a catalog primitive given and installed here.

    ``pallas`` also runs on the CPU in interpret mode (a debugging path, untuned).
    The ``jax_raw`` reference comes last: the first kernel registered for the GPU
    is its default, the GPU benchmarks' reference.
    """
    tune = tune or {}
    if numba_cuda is not None and has_numba_cuda():  # numba.cuda imported on use
        primitive.def_numba_cuda_kernel(numba_cuda, tune=tune.get("numba_cuda"))
    if triton is not None and has_triton():
        primitive.def_triton_kernel(triton, tune=tune.get("triton"))
    if pallas is not None and has_pallas():
        primitive.def_pallas_kernel("cpu", pallas)
        primitive.def_pallas_kernel("gpu", pallas, tune=tune.get("pallas"))
    primitive.def_jax_raw_kernel(jax_raw, platform="gpu")


def pallas_elementwise(
    body: Any, outs: Any, n_inputs: int, block: int = PALLAS_BLOCK
) -> Any:
    """A ``pallas_kernel`` of an elementwise ``body``, shaped for the platform.

    The returned function takes arrays of any (equal) shape: they are flattened,
    run through ``body`` and reshaped back. On the CPU (interpret mode) the body runs
    once on whole arrays: a grid there is a sequential loop of XLA ops, ten times
    slower at 10^6 elements. On the GPU each program handles ``block`` elements
    (``PALLAS_BLOCK`` unless tuned), and the arrays are padded to whole blocks: on
    an H200 with JAX 0.11.2, a ragged last block gave wrong elements of
    int8/int32/bool outputs (33 to 882 of 5000 and 10^6, varying between runs; plain
    ``pl.pallas_call`` alike), while whole blocks gave none.
    """
    import jax
    import jax.numpy as jnp

    from ..backends.pallas import pallas_kernel
    from ..contract.platform_context import current_platform

    shape = tuple(outs[0].shape)
    n = padded = int(np.prod(shape, dtype=np.int64))
    options: dict[str, Any] = {}
    if current_platform() == "gpu":
        from jax.experimental import pallas as pl

        padded = pl.cdiv(n, block) * block
        spec = pl.BlockSpec((block,), lambda i: (i,))
        options = {
            "grid": (padded // block,),
            "in_specs": [spec] * n_inputs,
            "out_specs": [spec] * len(outs),
            "num_warps": 4,
        }
    flat = [jax.ShapeDtypeStruct((padded,), o.dtype) for o in outs]
    kernel = pallas_kernel(body, flat, **options)

    def run(*xs: Any, **static: Any) -> Any:
        flat_xs = [x.reshape(n) for x in xs]
        if padded != n:
            flat_xs = [jnp.pad(x, (0, padded - n)) for x in flat_xs]
        results = kernel(*flat_xs, **static)
        return [r[:n].reshape(shape) for r in results]

    return run


def row_ids(indptr: Any, nnz: int) -> Any:
    """The row of every stored entry of a CSR matrix (traceable, static ``nnz``)."""
    import jax.numpy as jnp

    n_rows = indptr.shape[0] - 1
    return jnp.repeat(
        jnp.arange(n_rows, dtype=jnp.int32), jnp.diff(indptr), total_repeat_length=nnz
    )


def window_row_ids(window: Any, nnz: int) -> tuple[Any, Any]:
    """Row (within the window) of every stored entry, and which entries it holds.

    ``window`` is ``indptr[r0:r1 + 1]`` of a larger CSR matrix: absolute offsets into
    its ``nnz`` entries. Entries outside ``[window[0], window[-1])`` get row 0 and
    ``False``.
    """
    import jax.numpy as jnp

    k = jnp.arange(nnz, dtype=window.dtype)
    inside = (k >= window[0]) & (k < window[-1])
    rows = jnp.searchsorted(window, k, side="right").astype(jnp.int32) - 1
    return jnp.where(inside, rows, 0), inside


def random_csr(
    n_rows: int, n_cols: int, p: float, seed: int = 0, dtype: type = np.float32
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random CSR matrix with connection probability ``p`` (sorted column indices).

    Returns ``(data, indices, indptr)`` with int32 indices; built with NumPy only so
    that a 10-million-entry matrix takes about a second.
    """
    rng = np.random.default_rng(seed)
    counts = rng.binomial(n_cols, p, size=n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int32)
    np.cumsum(counts, out=indptr[1:])
    rows = np.repeat(np.arange(n_rows, dtype=np.int64), counts)
    cols = rng.integers(0, n_cols, size=rows.size, dtype=np.int64)
    keys = np.sort(rows * n_cols + cols)
    indices = (keys % n_cols).astype(np.int32)
    data = rng.uniform(0.01, 0.5, size=indices.size).astype(dtype)
    return data, indices, indptr
