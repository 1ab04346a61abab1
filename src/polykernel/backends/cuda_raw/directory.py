"""``load_cuda_dir``: compile every CUDA source file of a directory as one module.

The files matching ``file_patterns`` (default ``["*.cu"]``) are concatenated in a
stable order (patterns in order, files sorted by name within each, each file once)
into one translation unit, each preceded by a ``#line`` directive so compiler
messages name the real file and line. The directory is added to the include path,
so ``#include "common.cuh"`` finds headers that live next to the sources. The
result goes through :func:`~.loader.load_cuda_inline` unchanged:
same cache, same registration, same returned module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import KernelSourceNotFoundError, KernelTypeError
from ...platforms import LoweringPlatform
from .kernel import NativeModule
from .loader import load_source, read_source

__all__ = ["collect_sources", "load_cuda_dir"]


def collect_sources(
    directory: str | os.PathLike, file_patterns: Sequence[str] | None = None
) -> list[tuple[Path, str]]:
    """The ``(path, text)`` of every file of ``directory`` matching the patterns.

    Raises:
        KernelSourceNotFoundError: the directory is missing or nothing matches.
        KernelTypeError: ``file_patterns`` is not a list of strings.
    """
    if not isinstance(directory, str | os.PathLike):
        raise KernelTypeError(
            f"load_cuda_dir: directory must be a path (str or os.PathLike), got "
            f"{type(directory).__name__} {directory!r}."
        )
    root = Path(directory)
    patterns = ["*.cu"] if file_patterns is None else file_patterns
    if isinstance(patterns, str) or not all(isinstance(p, str) for p in patterns):
        raise KernelTypeError(
            f"load_cuda_dir: file_patterns must be a list of glob strings such as "
            f"['*.cu'] (got {file_patterns!r})."
        )
    if not root.is_dir():
        raise KernelSourceNotFoundError(
            f"load_cuda_dir: '{root}' is not a directory; pass the directory that "
            "holds the .cu files."
        )
    seen: dict[Path, None] = {}
    for pattern in patterns:
        for path in sorted(root.glob(pattern)):
            if path.is_file():
                seen.setdefault(path.resolve(), None)
    if not seen:
        raise KernelSourceNotFoundError(
            f"load_cuda_dir: no file in '{root}' matches {list(patterns)}; add sources "
            "or pass file_patterns=[...]."
        )
    return [(path, read_source("load_cuda_dir", path)) for path in seen]


def load_cuda_dir(
    directory: str | os.PathLike,
    functions: Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    *,
    name: str | None = None,
    file_patterns: list[str] | None = None,
    **kwargs: Any,
) -> NativeModule:
    """Compile the CUDA files of ``directory`` into one module and register it.

    Args:
        directory: Directory holding the sources (headers included from them are
            found there too).
        functions: As for :func:`load_cuda_inline`; ``None`` exports the functions
            marked ``// @pk name`` / ``// @BE name`` in the sources.
        name: Module name; default: the directory's name.
        file_patterns: Glob patterns of the sources, default ``["*.cu"]``.
        **kwargs: The keywords of :func:`load_cuda_inline` (``options=``,
            ``compute_capability=``, ...).

    Returns:
        The loaded module, as :func:`load_cuda_inline` returns it.

    Raises:
        KernelSourceNotFoundError: the directory is missing or holds no sources.

    Example:
        >>> from pathlib import Path
        >>> from polykernel import load_cuda_dir
        >>> kernels = Path("kernels")
        >>> kernels.mkdir()
        >>> _ = (kernels / "scale.cu").write_text('''
        ... __global__ void scale_kernel(const float* x, float* y, int64_t n) {
        ...   for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i] = 2 * x[i];
        ... }
        ... void scale(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream) {
        ...   const float* in = x.data_ptr<float>();  // one block strides over x
        ...   scale_kernel<<<1, 256, 0, stream>>>(in, y.data_ptr<float>(), x.numel());
        ... }''')
        >>> _ = (kernels / "shift.cu").write_text('''
        ... __global__ void shift_kernel(float* y, int64_t n) {
        ...   int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
        ...   if (i < n) y[i] += 1;
        ... }
        ... void shift(pk::Tensor& y, cudaStream_t stream) {
        ...   int64_t n = y.numel();
        ...   shift_kernel<<<(n + 255) / 256, 256, 0, stream>>>(y.data_ptr<float>(), n);
        ... }''')
        >>> mod = load_cuda_dir("kernels/", ["scale", "shift"],
        ...                     compute_capability="sm_80")
        >>> mod.function_names
        ['scale', 'shift']
    """
    files = collect_sources(directory, file_patterns)
    source = "\n".join(f'#line 1 "{_c_string(path)}"\n{text}' for path, text in files)
    module_name = name if name is not None else Path(directory).resolve().name
    return load_source(
        "load_cuda_dir",
        LoweringPlatform.CUDA,
        source,
        module_name,
        functions,
        kwargs,
        directory,
    )


def _c_string(path: Path) -> str:
    return str(path).replace("\\", "\\\\").replace('"', '\\"')
