"""The process-wide registry of primitives, filled by every ``XLACustomKernel``.

Each kernel registers itself under its name when it is created, so tools (the
``polykernel`` CLI, benchmarks, checks) can find every primitive a program defined.
Tags set with ``def_tags`` make the registry searchable by category.

A second primitive created under a name already taken replaces the first and emits a
:class:`~polykernel.errors.DuplicatePrimitiveWarning` that says where the first one was
created, which is usually a module imported twice under two names.
"""

from __future__ import annotations

import difflib
import os
import threading
import warnings
from collections.abc import Iterable
from typing import Any

from .._frames import first_outside
from ..errors import DuplicatePrimitiveWarning, KernelLookupError, KernelTypeError

__all__ = [
    "get_all_primitive_names",
    "get_primitive",
    "get_primitives_by_tags",
    "get_registry",
    "register",
    "unregister",
]

_LOCK = threading.Lock()
_KERNELS: dict[str, Any] = {}
_SITES: dict[str, str] = {}

# Frames inside polykernel's core are skipped when looking for the line that created
# a primitive, so the reported site is the user's ``XLACustomKernel(...)`` call.
_CORE_DIR = os.path.dirname(os.path.abspath(__file__))


def register(kernel: Any) -> None:
    """Add ``kernel`` to the registry under ``kernel.name``.

    ``XLACustomKernel`` calls this from its constructor; users rarely need to. A name
    already present is replaced, with a warning naming where the first was created.

    Args:
        kernel: An object with a ``name`` attribute (an ``XLACustomKernel``).

    Raises:
        KernelTypeError: ``kernel.name`` is missing or not a non-empty string.

    Example:
        >>> import polykernel as pk
        >>> from polykernel import get_all_primitive_names
        >>> op = pk.XLACustomKernel("docs.registry_demo")  # registers itself
        >>> "docs.registry_demo" in get_all_primitive_names()
        True
    """
    name = getattr(kernel, "name", None)
    if not isinstance(name, str) or not name:
        raise KernelTypeError(
            "polykernel registry: register() expects an object with a non-empty string "
            f"'name' attribute, got {type(kernel).__name__} with name={name!r}."
        )
    frame, level = first_outside(_CORE_DIR)
    site = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "<unknown>"
    with _LOCK:
        previous = _KERNELS.get(name)
        previous_site = _SITES.get(name, "<unknown>")
        _KERNELS[name] = kernel
        _SITES[name] = site
    if previous is not None and previous is not kernel:
        warnings.warn(
            f"polykernel: primitive {name!r} created at {site} replaces the primitive "
            f"of the same name created at {previous_site}. Give each primitive a "
            "unique name (for example prefix it with your package name).",
            DuplicatePrimitiveWarning,
            stacklevel=level,
        )


def unregister(name: str) -> bool:
    """Remove ``name`` from the registry; return whether it was present.

    Example:
        >>> from polykernel.core.registry import unregister
        >>> unregister("no.such.primitive")
        False
    """
    with _LOCK:
        _SITES.pop(name, None)
        return _KERNELS.pop(name, None) is not None


def get_registry() -> dict[str, Any]:
    """Return a copy of the registry as a ``{name: kernel}`` dict.

    Example:
        >>> from polykernel import get_registry
        >>> isinstance(get_registry(), dict)
        True
    """
    with _LOCK:
        return dict(_KERNELS)


def get_all_primitive_names() -> list[str]:
    """Return the names of every registered primitive, sorted.

    Example:
        >>> from polykernel import get_all_primitive_names
        >>> names = get_all_primitive_names()
        >>> names == sorted(names)
        True
    """
    with _LOCK:
        return sorted(_KERNELS)


def get_primitive(name: str) -> Any:
    """Return the primitive registered under ``name``.

    Raises:
        KernelLookupError: (a ``KeyError``) no primitive has that name; the message
            lists close names.

    Example:
        >>> import polykernel as pk
        >>> from polykernel import get_primitive
        >>> op = pk.XLACustomKernel("docs.get_primitive_demo")
        >>> get_primitive("docs.get_primitive_demo") is op
        True
    """
    if not isinstance(name, str):
        raise KernelTypeError(
            "polykernel registry: get_primitive(name) takes the primitive's name as a "
            f"string (got {type(name).__name__}: {name!r})."
        )
    with _LOCK:
        kernel = _KERNELS.get(name)
        names = sorted(_KERNELS)
    if kernel is not None:
        return kernel
    close = difflib.get_close_matches(str(name), names, n=5, cutoff=0.5)
    hint = (
        f"Did you mean: {', '.join(close)}?"
        if close
        else f"{len(names)} primitives are registered"
        + (f" (e.g. {', '.join(names[:5])})." if names else ".")
    )
    raise KernelLookupError(
        f"polykernel registry: no primitive named {name!r}. {hint} Primitives are "
        "registered when their module is imported; import it first."
    )


def _normalise_tags(tags: str | Iterable[str]) -> frozenset[str]:
    if isinstance(tags, str):
        return frozenset({tags})
    try:
        result = frozenset(tags)
    except TypeError:
        raise KernelTypeError(
            "polykernel registry: tags must be a string or an iterable of strings, "
            f"got {type(tags).__name__}: {tags!r}. Pass e.g. 'csr' or {{'csr', 'mv'}}."
        ) from None
    bad = [t for t in result if not isinstance(t, str)]
    if bad:
        raise KernelTypeError(
            "polykernel registry: tags must be strings, got "
            f"{', '.join(repr(t) for t in bad)}."
        )
    return result


def get_primitives_by_tags(tags: str | Iterable[str]) -> dict[str, Any]:
    """Return ``{name: kernel}`` for primitives carrying *all* of ``tags``.

    Args:
        tags: One tag or an iterable of tags; an empty set matches every primitive.

    Example:
        >>> import polykernel as pk
        >>> from polykernel import get_primitives_by_tags
        >>> op = pk.XLACustomKernel("docs.tags_demo")
        >>> op.def_tags("csr", "mv")
        >>> "docs.tags_demo" in get_primitives_by_tags({"csr"})
        True
    """
    wanted = _normalise_tags(tags)
    with _LOCK:
        items = list(_KERNELS.items())
    return {
        name: kernel
        for name, kernel in sorted(items)
        if wanted <= frozenset(getattr(kernel, "tags", ()) or ())
    }
