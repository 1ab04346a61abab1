"""Validate and normalise what a caller passes to a primitive: ``outs`` and keywords.

``outs`` may be one ``ShapeDtypeStruct``-like object (anything with ``.shape`` and
``.dtype``) or any pytree of them; the call returns arrays in the same structure.
Extra keyword arguments become primitive parameters, so they must be hashable.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from .errors import KernelRegistrationError, KernelTypeError

__all__ = [
    "RESERVED_KEYWORDS",
    "VMAP_METHODS",
    "as_array",
    "check_keywords",
    "flatten_outs",
    "kernel_aliases",
    "kernel_outs",
]

#: The ``vmap_method`` values of the kernel wrappers (``None``: the wrapper's default).
VMAP_METHODS = (
    None,
    "sequential",
    "sequential_unrolled",
    "expand_dims",
    "broadcast_all",
)

#: Keywords with a meaning of their own; a kernel parameter cannot use these names.
RESERVED_KEYWORDS = frozenset({"outs", "backend", "ins"})


def _is_struct(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def flatten_outs(owner: str, outs: Any) -> tuple[tuple[jax.ShapeDtypeStruct, ...], Any]:
    """Flatten ``outs`` into hashable structs plus the tree to rebuild results.

    Raises:
        KernelRegistrationError: ``outs`` is empty (a ``ValueError``).
        KernelTypeError: a leaf of ``outs`` has no ``.shape``/``.dtype``.
    """
    leaves, treedef = jax.tree.flatten(outs, is_leaf=_is_struct)
    if not leaves:
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}': `outs` is empty (got {outs!r}). Pass one "
            f"jax.ShapeDtypeStruct or a list of them, one per kernel output."
        )
    structs = []
    for i, leaf in enumerate(leaves):
        if not _is_struct(leaf):
            raise KernelTypeError(
                f"XLACustomKernel '{owner}': `outs` leaf {i} has no shape/dtype (got "
                f"{type(leaf).__name__}: {leaf!r}). Describe each output with "
                f"jax.ShapeDtypeStruct(shape, dtype)."
            )
        structs.append(_struct(f"XLACustomKernel '{owner}'", f"`outs` leaf {i}", leaf))
    return tuple(structs), treedef


def kernel_outs(
    where: str, outs: Any, check_dtype: Callable[[str, Any], object] | None = None
) -> tuple[tuple[jax.ShapeDtypeStruct, ...], bool]:
    """The ``outs`` of a kernel wrapper (``numba_kernel``, ``warp_kernel``, ...).

    ``outs`` is one ``ShapeDtypeStruct``-like object (then the wrapper returns one
    array: the second result is True) or a non-empty list/tuple of them.
    ``check_dtype(what, dtype)`` lets a backend refuse dtypes it cannot take.

    Raises:
        KernelRegistrationError: ``outs`` is empty or not a sequence (a ``ValueError``).
        KernelTypeError: an entry has no ``.shape``/``.dtype``.
    """
    single = _is_struct(outs)
    items = (outs,) if single else outs
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise KernelRegistrationError(
            f"{where}: outs must be a jax.ShapeDtypeStruct or a non-empty list/tuple "
            f"of them (got {outs!r})."
        )
    specs = []
    for i, out in enumerate(items):
        if not _is_struct(out):
            raise KernelTypeError(
                f"{where}: outs[{i}] must have .shape and .dtype, e.g. "
                f"jax.ShapeDtypeStruct (got {type(out).__name__}: {out!r})."
            )
        if check_dtype is not None:
            check_dtype(f"outs[{i}]", out.dtype)
        specs.append(_struct(where, f"outs[{i}]", out))
    return tuple(specs), single


def kernel_aliases(
    where: str, vmap_method: object, aliases: object, n_outputs: int
) -> dict[int, int]:
    """Check a kernel wrapper's ``vmap_method``; return ``input_output_aliases``.

    Raises:
        KernelRegistrationError: an unknown ``vmap_method`` or an alias to an output
            that does not exist (a ``ValueError``).
        KernelTypeError: ``aliases`` is not a dict of ints (or None).
    """
    if vmap_method not in VMAP_METHODS:
        raise KernelRegistrationError(
            f"{where}: vmap_method must be one of {VMAP_METHODS}, got {vmap_method!r}."
        )
    if aliases is None:
        return {}
    if not isinstance(aliases, dict) or not all(
        isinstance(k, int) and isinstance(v, int) for k, v in aliases.items()
    ):
        raise KernelTypeError(
            f"{where}: input_output_aliases must be a dict {{input index: output "
            f"index}} of ints, or None (got {type(aliases).__name__}: {aliases!r})."
        )
    for i, o in aliases.items():
        if not 0 <= o < n_outputs:
            raise KernelRegistrationError(
                f"{where}: input_output_aliases maps input {i} to output {o!r}, but "
                f"there are {n_outputs} outputs."
            )
    return dict(aliases)


def _struct(where: str, what: str, leaf: Any) -> jax.ShapeDtypeStruct:
    """``leaf`` as a ``ShapeDtypeStruct`` with int dims >= 0 and a NumPy dtype."""
    dims = leaf.shape
    if isinstance(dims, int):
        dims = (dims,)
    try:
        shape = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise KernelTypeError(
            f"{where}: {what} has shape {leaf.shape!r}; every dimension must be an int."
        ) from None
    if any(d < 0 for d in shape):
        raise KernelRegistrationError(
            f"{where}: {what} has shape {shape}; dimensions must be >= 0."
        )
    try:
        dtype = np.dtype(leaf.dtype)
    except TypeError:
        raise KernelTypeError(
            f"{where}: {what} has dtype {leaf.dtype!r}, which is not a NumPy/JAX dtype."
        ) from None
    return jax.ShapeDtypeStruct(shape, dtype)


def as_array(where: str, i: int, x: Any) -> Any:
    """Input ``i`` as an array JAX accepts (tracers and arrays pass through).

    Raises:
        KernelTypeError: JAX cannot convert it (a string, an object array, ...).
    """
    if hasattr(x, "aval"):
        return x
    try:
        return jax.numpy.asarray(x)
    except (TypeError, ValueError) as err:
        raise KernelTypeError(
            f"{where}: input {i} ({type(x).__name__}) is not an array JAX accepts: "
            f"{err} Pass a numeric NumPy or JAX array."
        ) from None


def check_keywords(owner: str, kwargs: Mapping[str, Any]) -> None:
    """Reject reserved or unhashable keyword arguments with a message naming them.

    Raises:
        KernelRegistrationError: a keyword uses a reserved name (a ``ValueError``).
        KernelTypeError: a keyword's value is not hashable.
    """
    for key, value in kwargs.items():
        if key in RESERVED_KEYWORDS:
            raise KernelRegistrationError(
                f"XLACustomKernel '{owner}': keyword '{key}' is reserved (reserved: "
                f"{sorted(RESERVED_KEYWORDS)}). Rename the kernel parameter."
            )
        try:
            hash(value)
        except TypeError:
            raise KernelTypeError(
                f"XLACustomKernel '{owner}': keyword argument '{key}' must be hashable "
                f"because it becomes a static primitive parameter (got "
                f"{type(value).__name__}). Pass a tuple instead of a list, or a Python "
                f"scalar instead of an array."
            ) from None
