"""The reference loaders' keyword arguments, checked and folded into CompileOptions.

``load_cpp_inline(..., extra_cflags=[...])`` and ``load_cuda_inline(...,
optimization_level=2, compute_capability="sm_86")`` mean what they mean in the
reference API. Each keyword sets one :class:`CompileOptions` field; giving a
setting both as a keyword and through ``options=`` (both away from their
defaults) is ambiguous and raises ``TypeError`` naming both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import KernelRegistrationError, KernelTypeError
from ...native.compiler import CompileOptions

__all__ = [
    "CPP_KEYWORDS",
    "CUDA_KEYWORDS",
    "VMAP_METHODS",
    "check_common",
    "merge_options",
]

# keyword -> (CompileOptions field, the keyword's default)
CPP_KEYWORDS: dict[str, tuple[str, Any]] = {
    "extra_cflags": ("extra_cflags", None),
    "extra_ldflags": ("ldflags", None),
    "extra_include_paths": ("include_paths", None),
}
CUDA_KEYWORDS: dict[str, tuple[str, Any]] = {
    "extra_cuda_cflags": ("extra_cflags", None),
    "extra_ldflags": ("ldflags", None),
    "extra_include_paths": ("include_paths", None),
    "compute_capability": ("cuda_arch", None),
    "optimization_level": ("optimization", 3),
    "use_fast_math": ("fast_math", False),
}
# What jax.ffi.ffi_call accepts on every supported JAX version.
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all")
_FIELD_DEFAULTS = {f.name: f.default for f in dataclasses.fields(CompileOptions)}


def merge_options(
    func: str,
    options: object,
    keywords: Mapping[str, tuple[str, Any]],
    given: Mapping[str, Any],
) -> CompileOptions:
    """``options`` with every non-default reference keyword of ``given`` applied.

    Raises:
        KernelTypeError: ``options`` is not a CompileOptions, a keyword has the wrong
            type, or a setting is given both ways.
        KernelRegistrationError: a keyword has a bad value (e.g. level 7).

    Example:
        >>> from polykernel.backends.cuda_raw.keywords import (
        ...     merge_options, CUDA_KEYWORDS,
        ... )
        >>> merge_options("load_cuda_inline", None, CUDA_KEYWORDS,
        ...               {"optimization_level": 1}).optimization
        1
    """
    if options is not None and not isinstance(options, CompileOptions):
        raise KernelTypeError(
            f"{func}: options must be a CompileOptions (got "
            f"{type(options).__name__}); e.g. options=polykernel.native.CompileOptions"
            "(optimization=2)."
        )
    changes = {}
    for keyword, (field, default) in keywords.items():
        value = given.get(keyword, default)
        unset = value is None or (isinstance(value, list | tuple) and not value)
        if unset or (type(value) is type(default) and value == default):
            continue
        if options is not None and getattr(options, field) != _FIELD_DEFAULTS[field]:
            raise KernelTypeError(
                f"{func}: the setting '{field}' is given twice, as {keyword}="
                f"{value!r} and as options=CompileOptions({field}="
                f"{getattr(options, field)!r}); pass it one way only."
            )
        changes[field] = _convert(func, keyword, value)
    base = options if options is not None else CompileOptions()
    return dataclasses.replace(base, **changes) if changes else base


def _convert(func: str, keyword: str, value: Any) -> Any:
    if keyword == "optimization_level":
        if isinstance(value, bool) or not isinstance(value, int):
            raise KernelTypeError(
                f"{func}: optimization_level must be an int 0-3 (got "
                f"{type(value).__name__} {value!r})."
            )
        if not 0 <= value <= 3:
            raise KernelRegistrationError(
                f"{func}: optimization_level={value!r} is out of range; expected "
                "0, 1, 2 or 3 (passed to the compiler as -O<n>)."
            )
        return value
    if keyword == "use_fast_math":
        return _bool(func, keyword, value)
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        example = "'sm_86'" if keyword == "compute_capability" else "['-DN=4']"
        raise KernelTypeError(
            f"{func}: {keyword} must be a string or a list of strings, e.g. "
            f"{keyword}={example} (got {type(value).__name__} {value!r})."
        )
    return tuple(value)


def _bool(func: str, keyword: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise KernelTypeError(
            f"{func}: {keyword} must be True or False (got {type(value).__name__} "
            f"{value!r})."
        )
    return value


def check_common(func: str, given: Mapping[str, Any]) -> None:
    """Check the keywords every loader shares (types and values), before any work.

    Raises:
        KernelTypeError: a wrong type (names the argument, expected and got).
        KernelRegistrationError: an unknown ``vmap_method`` (lists the valid ones).
    """
    for keyword in (
        "verbose",
        "force_rebuild",
        "replace",
        "auto_register",
        "allow_cuda_graph",
    ):
        if keyword in given:
            _bool(func, keyword, given[keyword])
    for keyword in ("target_prefix", "build_directory"):
        value = given.get(keyword)
        path_ok = keyword == "build_directory" and hasattr(value, "__fspath__")
        if value is not None and not isinstance(value, str) and not path_ok:
            raise KernelTypeError(
                f"{func}: {keyword} must be a string or None (got "
                f"{type(value).__name__} {value!r})."
            )
    method = given.get("vmap_method", "sequential")
    if not isinstance(method, str):
        raise KernelTypeError(
            f"{func}: vmap_method must be a string, one of "
            f"{', '.join(repr(m) for m in VMAP_METHODS)} (got "
            f"{type(method).__name__} {method!r})."
        )
    if method not in VMAP_METHODS:
        raise KernelRegistrationError(
            f"{func}: vmap_method={method!r} is not valid; expected one of "
            f"{', '.join(repr(m) for m in VMAP_METHODS)}."
        )
