"""Convert a Python scalar to a declared FFI attribute dtype, or say why not.

NumPy's own conversions are too forgiving for compile-time attributes:
``np.float32(None)`` is NaN, ``np.float32(1e300)`` is inf (with only a warning),
``np.int32(2.7)`` is 2 and ``np.float32("1.5")`` parses the string. Each of those
would hand a kernel a value its caller never wrote, so here they are errors that
name the attribute, the declared dtype and the value. NaN and inf are accepted
when the caller wrote them (a float that already is NaN or inf).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .errors import AttributeValueError, KernelCallError

__all__ = ["convert_attribute"]


def convert_attribute(where: str, name: str, value: Any, dtype: np.dtype) -> Any:
    """Return ``value`` as a NumPy scalar of ``dtype``; refuse lossy conversions.

    Raises:
        KernelCallError: (a ``TypeError``) ``value`` is not a real number or bool
            (``None``, a string, an array, a complex number...).
        AttributeValueError: (a ``ValueError`` and a ``KernelCallError``)
            ``value`` lies outside the range of ``dtype``, or is not integral
            where ``dtype`` is an integer type.

    Example:
        >>> convert_attribute("f", "alpha", 2, np.dtype("float32"))
        np.float32(2.0)
    """
    dtype = np.dtype(dtype)
    head = f"{where}: attribute '{name}'={value!r} cannot be converted to {dtype.name}"
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_):
        return dtype.type(value)
    if not isinstance(value, numbers.Real):
        raise KernelCallError(
            f"{head}: expected a real number, got {type(value).__name__}. Pass a "
            f"Python or NumPy scalar; arrays go in as inputs."
        )
    if dtype.kind == "b":
        if value not in (0, 1):
            raise AttributeValueError(
                f"{head}: a bool attribute takes True, False, 0 or 1."
            )
        return dtype.type(bool(value))
    if dtype.kind in "iu":
        return _to_int(head, value, dtype)
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
