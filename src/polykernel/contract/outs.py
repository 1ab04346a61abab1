"""``outs`` and inputs of a call, normalised by one set of rules for every backend.

``outs`` describes a kernel's results: one ``ShapeDtypeStruct``-like object (anything
with ``.shape`` and ``.dtype``) or a pytree of them. Every kernel wrapper and the
primitive itself go through :func:`normalize_outs`, so the same mistake gets the same
exception everywhere:

- ``outs`` that is neither a struct nor a container of them (``None``, ``3``), or
  has no entry (``[]``), is a ``KernelRegistrationError`` (a ``ValueError``);
- an entry without ``.shape``/``.dtype``, a non-int dimension or a non-dtype is a
  ``KernelTypeError`` (a ``TypeError``); a negative dimension a
  ``KernelRegistrationError``;
- a dtype the backend cannot take is refused by the backend's ``check_dtype``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import KernelRegistrationError, KernelTypeError

__all__ = [
    "PER_CALL",
    "OutSpec",
    "as_array",
    "as_dtype",
    "is_struct",
    "normalize_outs",
    "to_struct",
]

#: ``outs`` of a kernel whose every call passes its own ``outs``.
PER_CALL = object()


def is_struct(x: Any) -> bool:
    """Whether ``x`` describes one array (has ``.shape`` and ``.dtype``)."""
    return hasattr(x, "shape") and hasattr(x, "dtype")


@dataclass(frozen=True)
class OutSpec:
    """Normalised ``outs``: the structs in order and how to rebuild the results.

    Attributes:
        structs: one ``jax.ShapeDtypeStruct`` per output (int dims, NumPy dtype).
        treedef: the pytree structure of ``outs``.
        single: ``outs`` was one struct (the call returns one array).
        flat: ``outs`` was one struct or a flat list/tuple of them.
    """

    structs: tuple[Any, ...]
    treedef: Any
    single: bool
    flat: bool

    def __len__(self) -> int:
        return len(self.structs)

    def pack(self, results: Sequence[Any], sequence: type | None = tuple) -> Any:
        """Results in the shape of ``outs``: one array, a ``sequence`` (tuple) for
        a flat list/tuple of structs (what most kernel wrappers return), else —
        or with ``sequence=None`` always — the pytree of ``outs``."""
        results = list(results)  # as many as structs: BackendKernel checks emit's
        if self.single:
            return results[0]
        if self.flat and sequence is not None:
            return sequence(results)
        return self.treedef.unflatten(results)

    def unflatten(self, results: Sequence[Any]) -> Any:
        """Results in exactly the pytree structure of ``outs`` (the primitive's)."""
        return self.treedef.unflatten(list(results))


def normalize_outs(
    where: str, outs: Any, check_dtype: Callable[[str, Any], object] | None = None
) -> OutSpec:
    """Check ``outs`` and return it as an :class:`OutSpec`.

    Args:
        where: who is asking, for messages (``"warp_kernel 'add'"``).
        outs: one struct or a pytree of them.
        check_dtype: ``check_dtype(what, dtype)`` refuses dtypes the backend cannot
            take (it raises).

    Raises:
        KernelRegistrationError: ``outs`` has no entry, or a negative dimension.
        KernelTypeError: an entry has no ``.shape``/``.dtype`` or a bad one.
    """
    import jax

    single = is_struct(outs)
    leaves, treedef = jax.tree.flatten(outs, is_leaf=is_struct)
    container = single or isinstance(outs, list | tuple | dict)
    if not leaves or not container:
        raise KernelRegistrationError(
            f"{where}: outs must be a jax.ShapeDtypeStruct or a non-empty list/tuple "
            f"(or pytree) of them, one per kernel output (got {outs!r:.80})."
        )
    flat = single or (
        isinstance(outs, list | tuple) and all(is_struct(o) for o in outs)
    )
    structs = []
    for i, leaf in enumerate(leaves):
        what = f"outs[{i}]"
        if not is_struct(leaf):
            raise KernelTypeError(
                f"{where}: {what} must have .shape and .dtype, e.g. "
                f"jax.ShapeDtypeStruct(shape, dtype) (got {type(leaf).__name__}: "
                f"{leaf!r:.60})."
            )
        if check_dtype is not None:
            check_dtype(what, leaf.dtype)
        structs.append(to_struct(where, what, leaf))
    return OutSpec(tuple(structs), treedef, single, flat)


def to_struct(where: str, what: str, leaf: Any) -> Any:
    """``leaf`` as a ``ShapeDtypeStruct`` with int dims >= 0 and a NumPy dtype.

    Raises:
        KernelTypeError: a dimension is not an int, or the dtype is not a dtype.
        KernelRegistrationError: a dimension is negative.
    """
    import jax

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

    A numeric NumPy array is copied, then transferred with ``jax.device_put``.
    That gives what ``jnp.asarray`` gives: the same dtype (canonical for JAX's
    settings) and a buffer of its own, so changing the NumPy array later changes
    nothing. It skips the small XLA program ``jnp.asarray`` compiles for each new
    shape and dtype (~15-20 ms on a first eager call). An array in the other byte
    order (big-endian data read from a file) is converted to this machine's;
    ``jnp.asarray`` refuses it. Anything else goes through ``jnp.asarray``.

    Raises:
        KernelTypeError: JAX cannot convert it (a string, an object array, ...).
    """
    if hasattr(x, "aval"):
        return x
    import jax

    try:
        if _numeric(x):
            # A copy of our own: device_put may alias host memory on the CPU.
            native = x.dtype.newbyteorder("=")
            return jax.device_put(np.array(x, dtype=native, copy=True))
        return jax.numpy.asarray(x)
    except (TypeError, ValueError) as err:
        raise KernelTypeError(
            f"{where}: input {i} ({type(x).__name__}) is not an array JAX accepts: "
            f"{err} Pass a numeric NumPy or JAX array."
        ) from None


def as_dtype(x: Any, dtype: Any) -> Any:
    """``jnp.asarray(x, dtype)``, without the XLA program JAX compiles to convert a
    NumPy array of another dtype (~14 ms per new shape on a first eager call).

    A NumPy array or scalar of booleans or numbers whose dtype casts to ``dtype``
    within its kind (``np.can_cast(..., "same_kind")``: float64 to float32, int64 to
    int32, bool or int to float) is converted by NumPy on the host and transferred
    in a buffer of its own. Both round floats to nearest and wrap integers around
    alike; a float too large for ``dtype`` becomes inf with NumPy's overflow
    warning, as it does through ``jnp.asarray``. Anything else (a tracer, a JAX
    array, a list, a float to an integer) goes through ``jnp.asarray``.
    """
    import jax

    target = np.dtype(dtype)
    if (
        isinstance(x, np.ndarray | np.generic)
        and x.dtype.kind in "biuf"
        and np.can_cast(x.dtype, target, "same_kind")
    ):
        return jax.device_put(np.array(x, dtype=target, copy=True))
    return jax.numpy.asarray(x, dtype)


def _numeric(x: Any) -> bool:
    """A NumPy array of booleans or numbers."""
    return isinstance(x, np.ndarray) and x.dtype.kind in "biufc"
