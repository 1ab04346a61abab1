"""JAX dtypes and avals as Warp types: ``jaxtype_to_warptype``, ``jaxinfo_to_warpinfo``.

Warp is imported on first use (never by ``import polykernel``); a missing Warp is
an ``ImportError`` naming the pip extra, a dtype Warp lacks a ``TypeError`` naming
the dtype and every dtype Warp has.
"""

from __future__ import annotations

import types as pytypes
from typing import Any

import numpy as np

from ...errors import BackendUnavailableError, KernelTypeError

__all__ = [
    "WARP_DTYPES",
    "import_warp",
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
    """Import Warp quietly (once).

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
        KernelTypeError: (a ``TypeError``) Warp has no such dtype.
    """
    name = _dtype_name(dtype)
    if name not in WARP_DTYPES:
        raise KernelTypeError(
            f"{where}: Warp has no dtype {name}; Warp supports "
            f"{', '.join(WARP_DTYPES)}. Cast the array (e.g. x.astype(jnp.float32)) "
            f"before passing it to a Warp kernel."
        )
    return WARP_DTYPES[name]


def jaxtype_to_warptype(dtype: Any) -> Any:
    """The Warp scalar type of a JAX/NumPy ``dtype`` (e.g. ``wp.float32``).

    Raises:
        BackendUnavailableError: (an ``ImportError``) Warp is not installed.
        KernelTypeError: (a ``TypeError``) Warp has no such dtype (bfloat16,
            complex64, ...).

    Example:
        >>> import jax.numpy as jnp
        >>> jaxtype_to_warptype(jnp.float32).__name__  # doctest: +SKIP
        'float32'
    """
    name = warp_dtype_name(dtype)
    return getattr(import_warp(), name)


def jaxinfo_to_warpinfo(aval: Any) -> Any:
    """A Warp array type matching ``aval``'s dtype and rank.

    Args:
        aval: anything with ``.shape`` and ``.dtype`` (``jax.ShapeDtypeStruct``, a
            JAX or NumPy array, an abstract value).

    Returns:
        ``wp.array(dtype=..., ndim=len(aval.shape))``, usable as a kernel
        annotation; its ``.dtype`` is the Warp scalar type.

    Raises:
        BackendUnavailableError: (an ``ImportError``) Warp is not installed.
        KernelTypeError: (a ``TypeError``) ``aval`` has no shape/dtype, a rank
            above 4, or a dtype Warp lacks.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> t = jaxinfo_to_warpinfo(jax.ShapeDtypeStruct((4, 3), jnp.int32))
        ...                                                  # doctest: +SKIP
        >>> t.ndim, t.dtype.__name__                          # doctest: +SKIP
        (2, 'int32')
    """
    if not (hasattr(aval, "shape") and hasattr(aval, "dtype")):
        raise KernelTypeError(
            f"jaxinfo_to_warpinfo: expected an object with .shape and .dtype "
            f"(e.g. jax.ShapeDtypeStruct), got {type(aval).__name__}: {aval!r}."
        )
    ndim = len(tuple(aval.shape))
    if ndim > 4:
        raise KernelTypeError(
            f"jaxinfo_to_warpinfo: Warp arrays have at most 4 dimensions, got "
            f"shape {tuple(aval.shape)}. Reshape the array to 4 or fewer axes."
        )
    scalar = jaxtype_to_warptype(aval.dtype)
    return import_warp().array(dtype=scalar, ndim=max(ndim, 1))
