"""Where an object comes from, for content fingerprints (:mod:`.fingerprint`).

Code from the packages whose versions are part of every cache key (NumPy, Numba,
llvmlite, the standard library, ...) is *trusted*: it is identified by its
qualified name instead of its content. This module is the leaf both the generic
fingerprint and its Numba-specific part (:mod:`.objects`) build on.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Unfingerprintable", "function_module", "is_trusted_module"]

_TRUSTED = frozenset(
    ("numpy", "numba", "llvmlite", "math", "cmath", "builtins", "operator",
     "_operator", "functools", "itertools", "collections", "ml_dtypes")
)  # fmt: skip


class Unfingerprintable(ValueError):
    """Raised when an object reachable from a kernel cannot be hashed by content."""


def _trusted(module: Any) -> bool:
    return isinstance(module, str) and module.split(".")[0] in _TRUSTED


def function_module(fn: Any) -> str | None:
    """A function's module (its globals' ``__name__`` when ``__module__`` is unset,
    as for functions made by ``exec``)."""
    module = getattr(fn, "__module__", None)
    if module is None and isinstance(getattr(fn, "__globals__", None), dict):
        module = fn.__globals__.get("__name__")
    return module


#: Public name of :func:`_trusted`.
is_trusted_module = _trusted
