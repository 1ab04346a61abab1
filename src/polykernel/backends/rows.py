"""A backend's rows of ``polykernel info``, its ``usable`` and ``info_rows`` hooks
checked.

``polykernel info`` asks every backend whether it runs here. A plugin's hook that
raises or returns something else must not take the command (or the other backends'
rows) down with it: what the hooks return is checked here, once for every backend,
and a broken hook becomes a row saying which hook of which backend broke and how.
"""

from __future__ import annotations

from typing import Any

from ..contract.protocol import Backend, InfoRow
from ..errors import BackendHookError

__all__ = ["checked_info_rows", "checked_usable", "rows_of"]

_ROW = "(backend: str, platform: str, usable: bool, detail: str)"


def _head(backend: Backend, call: str) -> str:
    cls = type(backend)
    return f"backend '{backend.name}' hook {cls.__module__}.{cls.__qualname__}.{call}"


def _what(value: Any) -> str:
    try:
        shown = f"{value!r:.80}"
    except Exception:  # a value whose repr raises is still reported
        shown = "<unprintable>"
    return f"{type(value).__name__} {shown}"


def checked_usable(backend: Backend, platform: str, gpu: bool) -> tuple[bool, str]:
    """``backend.usable(platform, gpu)``, checked to be ``(bool, str)``.

    Raises:
        BackendHookError: the hook raised (chained) or returned something else.
    """
    head = _head(backend, f"usable({str(platform)!r}, gpu={gpu})")
    try:
        result = backend.usable(platform, gpu)
    except Exception as err:
        raise BackendHookError(
            f"{head} raised {type(err).__name__}: {err}; it must return (usable: "
            f"bool, detail: str), reporting what is missing as (False, reason)."
        ) from err
    if not (
        isinstance(result, tuple)
        and len(result) == 2
        and isinstance(result[0], bool)
        and isinstance(result[1], str)
    ):
        raise BackendHookError(
            f"{head} returned {_what(result)}; expected a tuple (usable: bool, "
            f"detail: str)."
        )
    return result


def checked_info_rows(backend: Backend, gpu: bool) -> list[InfoRow]:
    """``backend.info_rows(gpu)``, checked to be a list of ``(str, str, bool, str)``.

    Raises:
        BackendHookError: the hook raised (chained) or returned something else.
    """
    head = _head(backend, f"info_rows(gpu={gpu})")
    try:
        result = backend.info_rows(gpu)
    except Exception as err:
        raise BackendHookError(
            f"{head} raised {type(err).__name__}: {err}; it must return a list of "
            f"rows {_ROW}."
        ) from err
    if not isinstance(result, list | tuple):
        raise BackendHookError(
            f"{head} returned {_what(result)}; expected a list of rows {_ROW}."
        )
    for i, row in enumerate(result):
        if not _is_row(row):
            raise BackendHookError(
                f"{head} returned, as row {i}, {_what(row)}; expected {_ROW}."
            )
    return [(str(r[0]), str(r[1]), bool(r[2]), str(r[3])) for r in result]


def _is_row(row: Any) -> bool:
    types = (str, str, bool, str)
    return (
        isinstance(row, tuple | list)
        and len(row) == len(types)
        and all(isinstance(v, t) for v, t in zip(row, types, strict=True))
    )


def rows_of(backend: Backend, gpu: bool) -> list[InfoRow]:
    """Every row of ``backend``; a broken hook is a row saying so (never raises)."""
    if type(backend).info_rows is Backend.info_rows:
        # The default rows are usable() per platform: checking that hook itself
        # names it, and keeps the rows of the platforms where it works.
        return [_usable_row(backend, p, gpu) for p in backend.platforms]
    try:
        return checked_info_rows(backend, gpu)
    except BackendHookError as err:
        return [(backend.name, "-", False, f"broken: {err}")]


def _usable_row(backend: Backend, platform: str, gpu: bool) -> InfoRow:
    try:
        return (backend.name, str(platform), *checked_usable(backend, platform, gpu))
    except BackendHookError as err:
        return (backend.name, str(platform), False, f"broken: {err}")
