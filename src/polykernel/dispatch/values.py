"""Launch-parameter values: which ones a table can hold, and their exact JSON form.

A tuned value travels from ``def_kernel(tune=...)`` through a JSON table to a
generator call in another process, so it must come back as exactly what was
declared: ``(2, 2)`` a tuple (not a list), ``True`` a bool (not the int 1), ``2.0``
a float. Values are bools, ints, finite floats, strings and tuples of these;
anything else (NumPy scalars, lists, None, NaN) is refused where it is declared.

A tuple is written as ``{"tuple": [...]}`` (no other value is a JSON object, so the
form is unambiguous); :func:`token` is the canonical text of a value, the identity
two values are compared by — ``1``, ``1.0`` and ``True`` are three candidates, not
one.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["check_value", "decode", "encode", "token", "value_problem"]

_TUPLE = "tuple"
#: Deepest tuple nesting a value may have (a table is data from disk: bounded).
MAX_DEPTH = 8


def value_problem(value: Any, depth: int = 0) -> str | None:
    """Why ``value`` cannot be a launch-parameter value, or None when it can.

    Example:
        >>> from polykernel.dispatch.values import value_problem
        >>> value_problem((256, True)) is None, value_problem([256])
        (True, 'a list (use a tuple)')
    """
    if depth > MAX_DEPTH:
        return f"tuples nested deeper than {MAX_DEPTH}"
    if isinstance(value, bool | str) or type(value) is int:
        return None
    if type(value) is float:
        return None if math.isfinite(value) else f"the non-finite float {value!r}"
    if type(value) is tuple:
        for item in value:
            problem = value_problem(item, depth + 1)
            if problem is not None:
                return problem
        return None
    kind = type(value).__name__
    if type(value).__module__ == "numpy":
        return f"a NumPy {kind} (use a Python value, e.g. int(v) or float(v))"
    if isinstance(value, list):
        return "a list (use a tuple)"
    if value is None:
        return "None"
    return f"a {kind}"


def check_value(value: Any) -> Any:
    """``value`` if a table can hold it exactly, else ``ValueError`` saying why."""
    problem = value_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


def encode(value: Any) -> Any:
    """The JSON form of a checked value (tuples tagged)."""
    if type(value) is tuple:
        return {_TUPLE: [encode(v) for v in value]}
    return value


def decode(raw: Any, depth: int = 0) -> Any:
    """The value of a JSON form written by :func:`encode`; ``ValueError`` for
    anything :func:`encode` never writes.

    Example:
        >>> from polykernel.dispatch.values import decode, encode
        >>> decode(encode((1, (2.0, "a"), True)))
        (1, (2.0, 'a'), True)
    """
    if depth > MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {MAX_DEPTH}")
    if isinstance(raw, dict):
        if set(raw) != {_TUPLE} or not isinstance(raw[_TUPLE], list):
            raise ValueError(f"not a value: {_short(raw)}")
        return tuple(decode(v, depth + 1) for v in raw[_TUPLE])
    if isinstance(raw, bool | str) or type(raw) is int:
        return raw
    if type(raw) is float and math.isfinite(raw):
        return raw
    raise ValueError(f"not a value: {_short(raw)}")


def token(value: Any) -> str:
    """The canonical text of a value: equal tokens, identical values.

    Example:
        >>> from polykernel.dispatch.values import token
        >>> len({token(1), token(1.0), token(True)})
        3
    """
    return json.dumps(encode(value), sort_keys=True, separators=(",", ":"))


def _short(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."
