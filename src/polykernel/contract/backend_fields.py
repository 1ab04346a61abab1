"""The fields of a :class:`~.protocol.Backend`, checked by one set of rules.

A backend's fields are read far from where they were written: its name keys the
backend table, ``def_kernel`` and ``polykernel info``; its platforms pick paths; its
modules are looked up without importing them; its target pattern is matched against
every target an exported program calls, in another process. A bad value must be
refused where it is written, naming the field and the fix, instead of failing there.

- a wrong type (``name=None``, ``platforms="cpu"``, ``modules="numpy"``) is a
  ``KernelTypeError`` (a ``TypeError``);
- a bad value (``name=""``, ``platforms=("fpga",)``, ``target_pattern="("``) is a
  ``KernelRegistrationError`` (a ``ValueError``), the ``re.error`` chained.

:func:`check_fields` runs when a ``Backend`` is made and again, before the name is
taken, when it is registered (the fields are plain attributes and may have changed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..errors import KernelRegistrationError, KernelTypeError
from ..platforms import PLATFORMS, Platform

__all__ = ["check_fields", "check_platforms"]

_ALLOWED = ", ".join(repr(p) for p in PLATFORMS)


def check_fields(backend: Any) -> None:
    """Check every field of ``backend`` (a :class:`~.protocol.Backend`, which imports
    this module); normalise ``platforms`` (a tuple of
    :class:`~polykernel.platforms.Platform`, duplicates dropped) and ``modules``
    (a tuple).

    Raises:
        KernelTypeError: a field has the wrong type (a bare string for a sequence).
        KernelRegistrationError: a field has a bad value.
    """
    _check_name(backend.name)
    where = f"polykernel.Backend '{backend.name}'"
    backend.platforms = check_platforms(where, backend.platforms)
    backend.modules = _modules(where, backend.modules)
    _check_text(where, "summary", backend.summary, optional=False)
    _check_text(where, "extra", backend.extra, optional=True)
    if not isinstance(backend.reference, bool):
        raise KernelTypeError(
            f"{where}: reference must be True or False, got "
            f"{type(backend.reference).__name__} {backend.reference!r}."
        )
    _check_pattern(where, backend.target_pattern)
    _check_reviver(where, backend.reviver, backend.target_pattern)


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise KernelTypeError(
            f"polykernel.Backend: name must be a string, a Python identifier such as "
            f"'my_backend'; got {type(name).__name__} {name!r}."
        )
    if not name.isidentifier():
        raise KernelRegistrationError(
            f"polykernel.Backend: name {name!r} is not a valid backend name; use a "
            f"non-empty Python identifier (letters, digits and underscores, not "
            f"starting with a digit), e.g. 'my_backend'."
        )


def _sequence(where: str, field: str, value: Any, example: str, hint: str) -> list[Any]:
    """``value`` as a list; a bare string or a non-iterable is refused."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        got = (
            f"the string {value!r}"
            if isinstance(value, str)
            else (f"{type(value).__name__} {value!r}")
        )
        raise KernelTypeError(
            f"{where}: {field} must be a sequence (tuple or list) of {hint}, got "
            f"{got}; write e.g. {field}={example}."
        )
    return list(value)


def check_platforms(
    where: str, value: Any, owner: str = "a backend"
) -> tuple[Platform, ...]:
    """``value`` (a ``platforms`` field of ``owner``, named in messages) as a tuple
    of :class:`~polykernel.platforms.Platform`, duplicates dropped.

    Raises:
        KernelTypeError: not a sequence (a bare string included).
        KernelRegistrationError: an unknown platform, or none.
    """
    known = isinstance(value, str) and value in PLATFORMS
    example = f"({value!r},)" if known else "('cpu',)"
    hint = f"platform names from {_ALLOWED}"
    names = _sequence(where, "platforms", value, example, hint)
    unknown = [p for p in names if not (isinstance(p, str) and p in PLATFORMS)]
    if unknown:
        raise KernelRegistrationError(
            f"{where}: platforms: {', '.join(map(repr, unknown))} "
            f"{'is not a platform' if len(unknown) == 1 else 'are not platforms'}; "
            f"allowed values: {_ALLOWED}."
        )
    if not names:
        raise KernelRegistrationError(
            f"{where}: platforms is empty; {owner} has a path on at least one of "
            f"{_ALLOWED}."
        )
    return tuple(dict.fromkeys(Platform(p) for p in names))


def _modules(where: str, value: Any) -> tuple[str, ...]:
    example = f"({value!r},)" if isinstance(value, str) else "('numpy',)"
    names = _sequence(where, "modules", value, example, "module names")
    for name in names:
        if not isinstance(name, str):
            raise KernelTypeError(
                f"{where}: modules must hold module names (strings), got "
                f"{type(name).__name__} {name!r}."
            )
        if not all(part.isidentifier() for part in name.split(".")):
            raise KernelRegistrationError(
                f"{where}: modules: {name!r} is not an importable module name (dotted "
                f"identifiers, e.g. 'numpy' or 'numba.cuda')."
            )
    return tuple(names)


def _check_text(where: str, field: str, value: Any, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise KernelTypeError(
            f"{where}: {field} must be a string{' or None' if optional else ''}, got "
            f"{type(value).__name__} {value!r}."
        )
    if optional and not value.strip():  # extra="" would print polykernel[]
        raise KernelRegistrationError(
            f"{where}: {field} is an empty string; give the pip extra's name, or "
            f"None when nothing needs installing."
        )


def _check_pattern(where: str, pattern: Any) -> None:
    if pattern is None:
        return
    if not isinstance(pattern, str):
        raise KernelTypeError(
            f"{where}: target_pattern must be a regular expression (a string) or "
            f"None, got {type(pattern).__name__} {pattern!r}."
        )
    try:
        re.compile(pattern)
    except re.error as err:
        raise KernelRegistrationError(
            f"{where}: target_pattern {pattern!r} is not a regular expression "
            f"({err}); fix it: it is matched against whole XLA FFI target names."
        ) from err


def _check_reviver(where: str, reviver: Any, pattern: str | None) -> None:
    if reviver is None:
        return
    if not isinstance(reviver, str):
        raise KernelTypeError(
            f"{where}: reviver must be a string 'module:function' or None, got "
            f"{type(reviver).__name__} {reviver!r}."
        )
    module, _, function = reviver.partition(":")
    if not (
        function.isidentifier()
        and all(part.isidentifier() for part in module.split("."))
    ):
        raise KernelRegistrationError(
            f"{where}: reviver must be 'module:function' (e.g. "
            f"'my_package.revive:revive') or None, got {reviver!r}."
        )
    if pattern is None:
        raise KernelRegistrationError(
            f"{where}: reviver {reviver!r} is set but target_pattern is None, so no "
            f"target would ever be passed to it; set target_pattern to a regular "
            f"expression matching the target names the backend registers."
        )
