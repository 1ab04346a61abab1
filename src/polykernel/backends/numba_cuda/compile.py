"""Compile a ``@cuda.jit`` kernel ahead of the call: PTX (and a cubin) per arch.

The GPU path never asks Numba to launch anything. For the dtypes and ranks of a
call's buffers it compiles the kernel's Python function with
``numba.cuda.compile_ptx`` (NVVM, no GPU needed) for each target architecture,
links the PTX to a cubin with nvJitLink when ``cuda.core`` offers it (so a driver
older than the PTX ISA still loads the kernel), and hands both images to the
native launcher. Scalar parameters (the call's keywords, after the arrays) are
compiled for their dtypes and passed by value. Results are memoised per (kernel,
argument types, arch), and :func:`kernel_images` keeps them in the launcher's
build cache under a content key (:mod:`.fingerprint`): a new process whose cache
holds them reads them back without NVVM (no ``ldconfig``, no numba-cuda lowering
imported).

Example:
    >>> from numba import cuda
    >>> from polykernel.backends.numba_cuda.compile import compile_kernel
    >>> @cuda.jit
    ... def add(x, y, out):
    ...     i = cuda.grid(1)
    ...     if i < out.size:
    ...         out[i] = x[i] + y[i]
    >>> entry, images = compile_kernel(add, ("float32",) * 3, (1,) * 3, "90")
    >>> sorted(image.kind for image in images)  # no GPU needed: NVVM and nvJitLink
    ['cubin', 'ptx']
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import Any

from ...errors import (
    BackendUnavailableError,
    KernelCompilationError,
    KernelTypeError,
)
from ...launcher.cache import Build, cached_build
from ...launcher.kernels import KernelImage
from .fingerprint import build_key
from .numpy_shim import apply_numpy_shim

__all__ = [
    "check_kernel",
    "compile_kernel",
    "kernel_images",
    "kernel_name",
    "require_numba_cuda",
]

EXTRA = "pip install 'polykernel[numba-cuda]'"
_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(")
_EXTERN = re.compile(r"\.extern\s+\.func[^;]*?([A-Za-z_$][\w$]*)\s*\(")
_DRIVER_BUILTINS = {"vprintf"}  # resolved by the driver when the module loads


_GENERIC_TIMEDELTA = "The 'generic' unit for NumPy timedelta is deprecated"


def require_numba_cuda(where: str = "numba_cuda_kernel") -> Any:
    """Import and return ``numba.cuda`` (the real target), or name the extra.

    numba-cuda 0.30 builds ``np.timedelta64`` values with NumPy's deprecated generic
    unit while it imports; NumPy >= 2.5 warns about it once. The warning is about
    numba-cuda's own code, not the user's, so that one message is silenced here (a
    program run with ``-W error`` would otherwise fail to import it).
    """
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=_GENERIC_TIMEDELTA, category=DeprecationWarning
            )
            from numba import cuda
            from numba.cuda.dispatcher import CUDADispatcher  # noqa: F401
    except ImportError as err:
        raise BackendUnavailableError(
            f"{where}: Numba's CUDA target is not installed ({err}). Install it with "
            f"{EXTRA}."
        ) from err
    return cuda


def kernel_name(kernel: Any) -> str:
    fn = getattr(kernel, "py_func", kernel)
    return getattr(fn, "__qualname__", type(kernel).__name__)


def check_kernel(kernel: Any, where: str = "numba_cuda_kernel") -> None:
    """Accept a ``@cuda.jit`` kernel (not a device function) or raise KernelTypeError.

    ``KernelTypeError`` is both a ``TypeError`` and the ``AssertionError`` the
    reference documents.
    """
    from numba.cuda.dispatcher import CUDADispatcher

    sim = "numba.cuda.simulator" in type(kernel).__module__
    if not isinstance(kernel, CUDADispatcher) and not sim:
        raise KernelTypeError(
            f"{where}: kernel must be a Numba CUDA kernel (a function decorated with "
            f"@numba.cuda.jit, i.e. a numba.cuda.dispatcher.CUDADispatcher), got "
            f"{type(kernel).__module__}.{type(kernel).__qualname__}. Decorate it with "
            "@cuda.jit."
        )
    device = getattr(kernel, "targetoptions", {}).get("device") or getattr(
        kernel, "_device", False
    )
    if device:
        raise KernelTypeError(
            f"{where}: '{kernel_name(kernel)}' is a device function "
            "(@cuda.jit(device=True)); pass a kernel, which a device function cannot "
            "be launched as."
        )


def _array_types(dtypes: tuple[str, ...], ranks: tuple[int, ...]) -> tuple[Any, ...]:
    import numpy as np
    from numba import types
    from numba.np.numpy_support import from_dtype

    out = []
    for dtype, ndim in zip(dtypes, ranks, strict=True):
        try:
            scalar = from_dtype(np.dtype(dtype))
        except Exception as err:
            raise KernelCompilationError(
                f"numba_cuda_kernel: dtype {dtype} has no Numba-CUDA type; use "
                "float16/32/64, (u)int8-64, bool or complex64/128."
            ) from err
        out.append(types.Array(scalar, ndim, "C"))
    return tuple(out)


def _cubin(ptx: str, arch: str) -> bytes | None:
    """Link PTX to a cubin with nvJitLink, or None when it is not available."""
    try:
        # cuda.core fills its namespace from cu12/ or cu13/ at import time, out of
        # a type checker's sight.
        from cuda.core import Linker, LinkerOptions, ObjectCode  # pyright: ignore[reportAttributeAccessIssue]

        linker = Linker(ObjectCode.from_ptx(ptx.encode()),
                        options=LinkerOptions(arch=f"sm_{arch}"))  # fmt: skip
        return bytes(linker.link("cubin").code)
    except Exception:  # no nvJitLink: the driver JIT-compiles the PTX instead
        return None


def _scalar_types(dtypes: tuple[str, ...]) -> tuple[Any, ...]:
    import numpy as np
    from numba.np.numpy_support import from_dtype

    return tuple(from_dtype(np.dtype(d)) for d in dtypes)


@functools.lru_cache(maxsize=256)
def compile_kernel(
    kernel: Any,
    dtypes: tuple[str, ...],
    ranks: tuple[int, ...],
    arch: str,
    scalar_dtypes: tuple[str, ...] = (),
) -> tuple[str, tuple[KernelImage, ...]]:
    """Compile ``kernel`` for arrays of ``dtypes``/``ranks``, then scalars of
    ``scalar_dtypes``, and ``arch`` ('90').

    Returns:
        The PTX entry symbol and the images (a cubin when nvJitLink links it, and
        the PTX).
    """
    cuda = require_numba_cuda()
    apply_numpy_shim()
    options = getattr(kernel, "targetoptions", {})
    found = re.match(r"\d+", arch)
    assert found is not None  # a normalised arch: digits first ("90", "90a")
    digits = found.group()
    major, minor = int(digits[:-1]), int(digits[-1])
    try:
        ptx, _ = cuda.compile_ptx(
            kernel.py_func,
            _array_types(dtypes, ranks) + _scalar_types(scalar_dtypes),
            cc=(major, minor),
            fastmath=bool(options.get("fastmath", False)),
            lineinfo=bool(options.get("lineinfo", False)),
        )
    except KernelCompilationError:
        raise
    except Exception as err:
        raise KernelCompilationError(
            f"numba_cuda_kernel '{kernel_name(kernel)}': Numba could not compile it "
            f"for sm_{arch} with array arguments {list(dtypes)} of ranks "
            f"{list(ranks)} and scalars {list(scalar_dtypes)} "
            f"({type(err).__name__}: {err})."
        ) from err
    found = _ENTRY.findall(ptx)
    if len(found) != 1:
        raise KernelCompilationError(
            f"numba_cuda_kernel '{kernel_name(kernel)}': expected one .entry in the "
            f"PTX for sm_{arch}, found {len(found)}."
        )
    missing = sorted(set(_EXTERN.findall(ptx)) - _DRIVER_BUILTINS)
    if missing:
        raise KernelCompilationError(
            f"numba_cuda_kernel '{kernel_name(kernel)}': the kernel calls functions "
            f"that must be linked from other files ({', '.join(missing)}), which the "
            "native launcher does not link; wrap it with numba_cuda_callable, which "
            "launches through Numba."
        )
    images = [KernelImage("ptx", arch, ptx.encode())]
    cubin = _cubin(ptx, arch)
    if cubin is not None:
        images.insert(0, KernelImage("cubin", arch, cubin))
    return found[0], tuple(images)


@functools.lru_cache(maxsize=256)
def kernel_images(
    kernel: Any,
    dtypes: tuple[str, ...],
    ranks: tuple[int, ...],
    arches: tuple[str, ...],
    scalar_dtypes: tuple[str, ...] = (),
) -> tuple[str, tuple[KernelImage, ...]]:
    """The entry symbol and images of ``kernel`` for every arch of ``arches``: from
    the launcher's build cache when it holds them (by content key), else compiled
    (:func:`compile_kernel`) and kept there."""

    def compile_all() -> tuple[str, tuple[KernelImage, ...]]:
        entry, images = "", ()
        for arch in arches:
            entry, more = compile_kernel(kernel, dtypes, ranks, arch, scalar_dtypes)
            images += more
        return entry, images

    return cached_build(build_key(kernel, dtypes, ranks, arches, scalar_dtypes),
                        compile_all, lambda made: Build(*made),
                        lambda found: (found.entry, found.images))  # fmt: skip
