"""JAX dtypes and avals as Warp types: ``jaxtype_to_warptype``, ``jaxinfo_to_warpinfo``.

Warp is imported on first use (never by ``import polykernel``); a missing Warp is
an ``ImportError`` naming the pip extra, a dtype Warp lacks an
:class:`~polykernel.errors.UnsupportedDtypeError` (a ``ValueError``, as the reference
raises, and a ``TypeError``) naming the dtype and every dtype Warp has.
"""

from __future__ import annotations

import types as pytypes
from typing import Any

import numpy as np

from ...errors import (
    BackendUnavailableError,
    KernelTypeError,
    UnsupportedDtypeError,
    UnsupportedShapeError,
)

__all__ = [
    "WARP_DTYPES",
    "import_warp",
    "init_warp",
    "jaxinfo_to_warpinfo",
    "jaxtype_to_warptype",
    "warp_dtype_name",
]

#: NumPy dtype name -> name of the Warp scalar type (every dtype Warp has).
WARP_DTYPES = {
    "bool": "bool",
    "int8": "int8",
    "uint8": "uint8",
    "int16": "int16",
    "uint16": "uint16",
    "int32": "int32",
    "uint32": "uint32",
    "int64": "int64",
    "uint64": "uint64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
}
INSTALL_HINT = "pip install 'polykernel[warp]'"


def import_warp() -> pytypes.ModuleType:
    """Import Warp quietly (once), without starting its runtime.

    Defining, hashing and naming kernels needs no runtime; starting it loads Warp's
    native libraries and asks ``platform.processor()``, which runs ``uname -p`` in
    a new process: only a build does (:func:`init_warp`).

    Raises:
        BackendUnavailableError: (an ``ImportError``) Warp is not installed.
    """
    try:
        import warp
    except ImportError as err:
        raise BackendUnavailableError(
            "polykernel warp backend: the 'warp-lang' package is not installed "
            f"(import warp failed: {err}). Install it with: {INSTALL_HINT}"
        ) from err
    _quiet(warp)
    return warp


def init_warp() -> pytypes.ModuleType:
    """Import Warp quietly and start its runtime (once): what a build needs.

    Raises:
        BackendUnavailableError: (an ``ImportError``) Warp is not installed.
    """
    warp = import_warp()
    _init_without_driver_warning(warp)
    return warp


_DRIVER_WARNING = b"Warp CUDA warning: Could not find or load the NVIDIA CUDA driver"
_initialised = False


def _cuda_driver_loads() -> bool:
    """Whether the CUDA driver library loads here (as Warp looks for it)."""
    import ctypes

    for name in ("libcuda.so", "libcuda.so.1"):
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def _init_without_driver_warning(warp: pytypes.ModuleType) -> None:
    """Initialise Warp once. On a machine without a CUDA driver Warp's native init
    prints "Warp CUDA warning: Could not find or load the NVIDIA CUDA driver" to
    stderr, which a CPU-only run does not need: that line is dropped (anything else
    it prints is kept), unless ``JAX_PLATFORMS`` asks for a GPU (``polykernel
    info`` reports Warp's GPU path as unusable either way)."""
    global _initialised
    if _initialised:
        return
    _initialised = True
    import os
    import sys
    import tempfile

    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    if "cuda" in platforms or "gpu" in platforms or _cuda_driver_loads():
        warp.init()
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:
        warp.init()
        return
    try:
        with tempfile.TemporaryFile() as tmp:
            os.dup2(tmp.fileno(), 2)
            try:
                warp.init()
            finally:
                os.dup2(saved, 2)
            tmp.seek(0)
            printed = tmp.read()
    finally:
        os.close(saved)
    kept = [
        line
        for line in printed.splitlines(keepends=True)
        if not line.startswith(_DRIVER_WARNING)
    ]
    if kept:
        sys.stderr.write(b"".join(kept).decode(errors="replace"))
        sys.stderr.flush()


def _quiet(warp: pytypes.ModuleType) -> None:
    """No banner or per-module load lines on stdout (they would mix into the
    output of our CLI and benchmarks); a level the user chose is kept."""
    info, warning = getattr(warp, "LOG_INFO", None), getattr(warp, "LOG_WARNING", None)
    if info is None or warning is None:  # older Warp: a boolean switch
        warp.config.quiet = True
    elif warp.config.log_level == info:  # Warp's default
        warp.config.log_level = warning


def _dtype_name(dtype: Any) -> str:
    try:
        return np.dtype(dtype).name
    except TypeError:
        return getattr(dtype, "__name__", None) or repr(dtype)


def warp_dtype_name(dtype: Any, where: str = "jaxtype_to_warptype") -> str:
    """The Warp scalar type name for ``dtype`` (no Warp import).

    Raises:
        UnsupportedDtypeError: (a ``ValueError`` and a ``TypeError``) Warp has no
            such dtype.
    """
    name = _dtype_name(dtype)
    if name not in WARP_DTYPES:
        raise UnsupportedDtypeError(
            f"{where}: Warp has no dtype {name}; Warp supports "
            f"{', '.join(WARP_DTYPES)}. Cast the array (e.g. x.astype(jnp.float32)) "
            f"before passing it to a Warp kernel."
        )
    return WARP_DTYPES[name]


def jaxtype_to_warptype(dtype: Any) -> Any:
    """The Warp scalar type of a JAX/NumPy ``dtype`` (e.g. ``wp.float32``).

    Raises:
        BackendUnavailableError: (an ``ImportError``) Warp is not installed.
        UnsupportedDtypeError: (a ``ValueError`` and a ``TypeError``) Warp has no
            such dtype (bfloat16, complex64, ...).

    Example:
        >>> import jax.numpy as jnp
        >>> from polykernel import jaxtype_to_warptype
        >>> jaxtype_to_warptype(jnp.float32).__name__
        'float32'
    """
    name = warp_dtype_name(dtype)
    return getattr(import_warp(), name)


def jaxinfo_to_warpinfo(jax_info: Any) -> Any:
    """A Warp array type matching ``jax_info``'s dtype and rank.

    Args:
        jax_info: anything with ``.shape`` and ``.dtype`` (``jax.ShapeDtypeStruct``,
            a JAX or NumPy array, an abstract value) of rank 1 to 4.

    Returns:
        ``wp.array(dtype=..., ndim=len(jax_info.shape))``, usable as a kernel
        annotation; its ``.dtype`` is the Warp scalar type.

    Raises:
        BackendUnavailableError: (an ``ImportError``) Warp is not installed.
        KernelTypeError: (a ``TypeError``) ``jax_info`` has no shape/dtype (a dtype
            such as ``np.float32`` is not an array description).
        UnsupportedShapeError: (a ``ValueError`` and a ``TypeError``) a 0-d shape
            (Warp arrays have at least one axis) or a rank above 4.
        UnsupportedDtypeError: (a ``ValueError`` and a ``TypeError``) a dtype Warp
            lacks.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from polykernel import jaxinfo_to_warpinfo
        >>> t = jaxinfo_to_warpinfo(jax.ShapeDtypeStruct((4, 3), jnp.int32))
        >>> t.ndim, t.dtype.__name__
        (2, 'int32')
    """
    shape = _shape_of(jax_info)
    if not 1 <= len(shape) <= 4:
        raise UnsupportedShapeError(
            f"jaxinfo_to_warpinfo: jax_info has shape {shape}, but Warp arrays have "
            f"1 to 4 dimensions. "
            + (
                "Pass a 0-d value as a shape-(1,) array (x.reshape(1)) or as a "
                "scalar kernel argument."
                if not shape
                else "Reshape the array to 4 or fewer axes."
            )
        )
    scalar = jaxtype_to_warptype(jax_info.dtype)
    return import_warp().array(dtype=scalar, ndim=len(shape))


def _shape_of(jax_info: Any) -> tuple[int, ...]:
    """``jax_info.shape`` as a tuple, or our error naming the argument."""
    shape = None if isinstance(jax_info, type) else getattr(jax_info, "shape", None)
    if shape is not None and hasattr(jax_info, "dtype"):
        try:
            return tuple(int(d) for d in shape)
        except TypeError:
            pass
    raise KernelTypeError(
        f"jaxinfo_to_warpinfo: jax_info must describe an array (an object with "
        f".shape and .dtype, e.g. jax.ShapeDtypeStruct((n,), jnp.float32)), got "
        f"{type(jax_info).__name__}: {jax_info!r}. For a dtype alone use "
        f"jaxtype_to_warptype."
    )
