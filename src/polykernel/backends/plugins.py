"""Backends installed as plugins: the ``polykernel.backends`` entry points, each one
isolated from the others and from polykernel.

An entry point names a :class:`~polykernel.contract.protocol.Backend`, a ``Backend``
subclass made without arguments, or a function returning one. Loading it runs code
polykernel did not write, so anything can go wrong: the module does not import, the
object is a string or None, the factory raises or returns something else, the
``Backend`` is invalid. Each such entry point becomes one :class:`BrokenPlugin`
(one ``PolykernelWarning`` naming it and the cause, one row of ``polykernel info``)
and is skipped: every other backend, and every call, keeps working.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Any

from ..contract.backend_fields import check_fields
from ..contract.protocol import Backend, InfoRow
from ..errors import KernelRegistrationError, KernelTypeError

__all__ = ["BrokenPlugin", "PluginError", "backend_of", "broken", "entry_points"]


class PluginError(Exception):
    """Why one entry point gives no backend (internal: becomes a BrokenPlugin)."""


@dataclass(frozen=True)
class BrokenPlugin:
    """An entry point of the group that gave no backend, and why.

    Attributes:
        name: the entry point's name.
        value: what it points at (``"module:attribute"``).
        distribution: the installed distribution declaring it ("" when unknown).
        cause: what went wrong.
    """

    name: str
    value: str
    distribution: str
    cause: str

    def describe(self) -> str:
        """Where it is declared, for messages."""
        dist = f" of distribution '{self.distribution}'" if self.distribution else ""
        return f"entry point '{self.name} = {self.value}'{dist}"

    def message(self) -> str:
        """The text of its warning."""
        owner = f"'{self.distribution}'" if self.distribution else "declaring it"
        return (
            f"polykernel: the backend plugin {self.describe()} (group "
            f"'polykernel.backends') is skipped: {self.cause}. Fix the plugin (the "
            f"entry point must name a polykernel.Backend, or a class or function "
            f"returning one) or uninstall the package {owner}."
        )

    def row(self) -> InfoRow:
        """Its row of ``polykernel info``: what is wrong, no platform."""
        return (self.name, "-", False, f"broken plugin, skipped: {self.cause}")


def entry_points(group: str) -> list[Any]:
    """The entry points of ``group``.

    Raises:
        PluginError: the installed metadata cannot be read.
    """
    try:
        return list(importlib.metadata.entry_points(group=group))
    except Exception as err:  # malformed metadata of some installed package
        raise PluginError(f"reading the entry points failed ({_text(err)})") from err


def backend_of(point: Any) -> Backend:
    """The valid :class:`Backend` entry point ``point`` gives.

    Raises:
        PluginError: it gives none (the cause is the message).
    """
    try:
        found = point.load()
    except Exception as err:
        raise PluginError(f"loading it raised {_text(err)}") from err
    if not isinstance(found, Backend):
        if not callable(found):
            raise PluginError(f"it is {_what(found)}, not a polykernel.Backend")
        maker = getattr(found, "__qualname__", type(found).__name__)
        try:
            made = found()
        except Exception as err:  # a factory that raises, a class needing arguments
            raise PluginError(f"calling {maker}() raised {_text(err)}") from err
        if not isinstance(made, Backend):
            raise PluginError(
                f"{maker}() returned {_what(made)}, not a polykernel.Backend"
            )
        found = made
    try:  # fields are plain attributes: they may have changed since it was made
        check_fields(found)
    except (KernelTypeError, KernelRegistrationError) as err:
        raise PluginError(f"its Backend is invalid: {str(err).rstrip('.')}") from err
    return found


def broken(point: Any, cause: str) -> BrokenPlugin:
    """The record of ``point`` failing with ``cause``."""
    dist = getattr(point, "dist", None)
    return BrokenPlugin(
        str(getattr(point, "name", "?")),
        str(getattr(point, "value", "?")),
        str(getattr(dist, "name", "") or ""),
        cause,
    )


def _text(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).rstrip('.')}"  # the cause ends a sentence


def _what(value: Any) -> str:
    try:
        shown = f"{value!r:.60}"
    except Exception:  # a plugin's object whose repr raises must not break loading
        shown = "<unprintable>"
    return f"{type(value).__name__} {shown}"
