"""Scalar keywords of a kernel call: one refusing converter for every backend.

A kernel's scalar parameters (Numba and Warp kernel arguments, Triton scalars, the
attributes of a native function) are given as keywords of the call and become
compile-time constants of that call. NumPy's own conversions are too forgiving for
them: ``np.float32(None)`` is NaN, ``np.float32(1e300)`` is inf (with only a
warning), ``np.int32(2**40)`` wraps to 0, ``np.uint32(-1)`` to 4294967295,
``np.int32(2.7)`` is 2, ``np.float32("1.5")`` parses the string and ``bool("False")``
is True. Each would hand a kernel a value its caller never wrote, so every backend
converts through :func:`convert_scalars`, which refuses them with an error naming the
kernel, the parameter, the dtype and the value:

- not a real number or bool (``None``, a string, a complex number, an array, a
  traced value): :class:`~polykernel.errors.KernelCallError` (a ``TypeError``);
- out of the dtype's range, not integral for an integer dtype, or neither 0 nor 1
  for a bool: :class:`~polykernel.errors.AttributeValueError` (a ``ValueError`` and a
  ``KernelCallError``).

``True``/``False`` are accepted for numbers (as 1 and 0, Python's meaning); NaN and
inf are accepted for a float dtype when the caller wrote them. The dtype comes from
the kernel: declared (Warp annotations, native specs) or inferred from the value by
the backend's rule (Numba, Numba-CUDA, Triton); :func:`inferred_dtype` is the
shared part. A static parameter (a Pallas keyword, a Triton constexpr) takes any
hashable Python value as it is; a traced or unhashable one is a
:class:`~polykernel.errors.KernelCallError` too.
"""

from __future__ import annotations

import keyword
import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ..errors import AttributeValueError, KernelCallError
from .parameters import STATIC

__all__ = [
    "Scalars",
    "check_names",
    "convert_attribute",
    "convert_scalars",
    "inferred_dtype",
    "real_value",
    "static_value",
]

#: Converted scalars: ``(name, NumPy scalar)`` pairs sorted by name (XLA's order).
Scalars = tuple[tuple[str, Any], ...]


def real_value(where: str, name: str, value: Any, head: str | None = None) -> Any:
    """``value`` unwrapped from a 0-d array, if it is a real number or a bool.

    Raises:
        KernelCallError: anything else (``None``, str, complex, arrays, tracers).
    """
    import jax

    _refuse_traced(where, name, value)
    if isinstance(value, jax.Array | np.ndarray) and value.ndim == 0:
        value = np.asarray(value)[()]
    if isinstance(value, bool | np.bool_ | numbers.Real):
        return value
    head = head or f"{where}: attribute '{name}'={value!r:.60} is not a scalar"
    raise KernelCallError(
        f"{head}: expected a real number, got {type(value).__name__}. Pass a Python "
        f"or NumPy scalar; arrays go in as inputs."
    )


def _refuse_traced(where: str, name: str, value: Any) -> None:
    import jax.core

    if isinstance(value, jax.core.Tracer):
        raise KernelCallError(
            f"{where}: attribute '{name}' is a traced value; scalar keywords are "
            f"compile-time constants. Pass it as an input array instead, or make it "
            f"static (jax.jit(..., static_argnames=...))."
        )


def static_value(where: str, name: str, value: Any) -> Any:
    """``value`` of a :data:`~.parameters.STATIC` parameter, as it is.

    Raises:
        KernelCallError: a traced value, or one that is not hashable (a static
            value is part of what the kernel is compiled for).
    """
    _refuse_traced(where, name, value)
    try:
        hash(value)
    except TypeError:
        raise KernelCallError(
            f"{where}: attribute '{name}'={value!r:.60} is a static value (a "
            f"compile-time constant, passed as it is), so it must be hashable (got "
            f"{type(value).__name__}). Pass a tuple instead of a list, or a scalar "
            f"instead of an array."
        ) from None
    return value


def inferred_dtype(
    value: Any, python_int: str = "int64", python_float: str = "float64"
) -> np.dtype | None:
    """The dtype a backend without declared types gives ``value``.

    NumPy scalars keep their dtype; ``bool`` is ``bool``; a Python ``int`` is
    ``python_int`` and a Python ``float`` ``python_float``; anything else (``None``,
    a string, ...) has none (the converter then refuses it).
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, bool | np.bool_ | numbers.Real):
        return None
    if isinstance(value, np.generic):
        return value.dtype
    if isinstance(value, bool):
        return np.dtype(bool)
    if isinstance(value, numbers.Integral):
        return np.dtype(python_int)
    return np.dtype(python_float)


def check_names(where: str, names: Iterable[Any]) -> None:
    """Refuse a keyword name that is not a Python identifier (``**{"class": 1}``).

    Raises:
        KernelCallError: names the first such name.
    """
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(
            name
        ):
            raise KernelCallError(
                f"{where}: attribute name {name!r} is not a valid Python identifier."
            )


def convert_scalars(
    where: str,
    values: Mapping[str, Any],
    dtype_of: Callable[[str, Any], Any],
) -> Scalars:
    """Check and convert every scalar keyword; the result is sorted by name.

    Args:
        where: the kernel, for messages (``"warp_kernel 'axpy'"``).
        values: the call's scalar keywords.
        dtype_of: ``dtype_of(name, value) -> dtype`` gives the parameter's declared
            dtype, or the one the backend infers from the value (None when it
            cannot: the value is then refused), or :data:`~.parameters.STATIC`
            (the value passes as it is, if hashable and not traced).

    Raises:
        KernelCallError: a name that is not an identifier, or a value that is not a
            real number or bool.
        AttributeValueError: a value the dtype cannot hold exactly.

    Example:
        >>> from polykernel.contract.scalars import convert_scalars
        >>> convert_scalars("f", {"n": 3, "a": 0.5},
        ...                 lambda name, v: "int32" if name == "n" else "float32")
        (('a', np.float32(0.5)), ('n', np.int32(3)))
    """
    check_names(where, values)
    result = []
    for name in sorted(values):
        value = values[name]
        dtype = dtype_of(name, value)
        if dtype is STATIC:
            result.append((name, static_value(where, name, value)))
        else:
            result.append((name, convert_attribute(where, name, value, dtype)))
    return tuple(result)


def convert_attribute(where: str, name: str, value: Any, dtype: Any) -> Any:
    """Return ``value`` as a NumPy scalar of ``dtype``; refuse lossy conversions.

    Raises:
        KernelCallError: (a ``TypeError``) ``value`` is not a real number or bool
            (``None``, a string, an array, a complex number...).
        AttributeValueError: (a ``ValueError`` and a ``KernelCallError``)
            ``value`` lies outside the range of ``dtype``, or is not integral
            where ``dtype`` is an integer type.

    Example:
        >>> import numpy as np
        >>> from polykernel.contract.scalars import convert_attribute
        >>> convert_attribute("f", "alpha", 2, np.dtype("float32"))
        np.float32(2.0)
    """
    target = "a scalar" if dtype is None else np.dtype(dtype).name
    head = f"{where}: attribute '{name}'={value!r:.60} cannot be converted to {target}"
    value = real_value(where, name, value, head)
    if dtype is None:
        raise KernelCallError(
            f"{head}: {type(value).__name__} values have no scalar type here; pass a "
            f"Python bool, int or float, or a NumPy scalar of a supported dtype."
        )
    dtype = np.dtype(dtype)
    if isinstance(value, bool | np.bool_):
        return dtype.type(value)
    if dtype.kind == "b":
        if value not in (0, 1):
            raise AttributeValueError(
                f"{head}: a bool attribute takes True, False, 0 or 1."
            )
        return dtype.type(bool(value))
    if dtype.kind in "iu":
        return _to_int(head, value, dtype)
    if dtype.kind != "f":
        raise KernelCallError(
            f"{head}: scalar parameters take bool, integer or real floating dtypes."
        )
    return _to_float(head, value, dtype)


def _to_int(head: str, value: numbers.Real, dtype: np.dtype) -> Any:
    if isinstance(value, numbers.Integral):
        number = int(value)
    else:
        fvalue = float(value)
        if not math.isfinite(fvalue) or not fvalue.is_integer():
            raise AttributeValueError(
                f"{head}: an integer attribute needs an integral value; round it "
                f"yourself (int(...)) if truncation is what you mean."
            )
        number = int(fvalue)
    info = np.iinfo(dtype)
    if not info.min <= number <= info.max:
        raise AttributeValueError(f"{head}: out of its range [{info.min}, {info.max}].")
    return dtype.type(number)


def _to_float(head: str, value: numbers.Real, dtype: np.dtype) -> Any:
    try:
        fvalue = float(value)
    except OverflowError:  # an int beyond float64
        fvalue = math.inf
    if math.isfinite(fvalue):
        with np.errstate(over="ignore"):
            converted = dtype.type(fvalue)
        if math.isfinite(float(converted)):
            return converted
    elif not isinstance(value, numbers.Integral):
        return dtype.type(fvalue)  # NaN or inf written by the caller
    raise AttributeValueError(
        f"{head}: out of its range (it would become inf). Declare a "
        "wider type (float64) or scale the value."
    )
