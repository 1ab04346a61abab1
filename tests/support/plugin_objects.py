"""What ``polykernel.backends`` entry points name in the plugin tests: every kind of
broken plugin, and good ones (an object, a class, a factory) listed after them.

Importing this module must succeed: the plugins that break at import are separate
modules (``plugin_import_error.py``, ``plugin_empty_name.py``).
"""

from __future__ import annotations

import polykernel as pk

# -- broken ---------------------------------------------------------------------------
NOT_A_BACKEND = "numba"
NOTHING = None
NUMBER = 5


def raising_factory() -> pk.Backend:
    raise RuntimeError("the plugin's factory broke")


def junk_factory() -> object:
    return "junk"


class NeedsArguments(pk.Backend):
    """A Backend class an entry point names, but that cannot be made without
    arguments."""

    def __init__(self, flavour: str) -> None:
        super().__init__(name=f"needs_{flavour}")


EMPTIED = pk.Backend(name="pk_plugin_emptied")
EMPTIED.name = ""  # valid when made, broken since: the table checks again

TAKEN = pk.Backend(name="numba", summary="a plugin claiming a built-in name")


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


UNPRINTABLE = Unprintable()

# -- good -----------------------------------------------------------------------------
GOOD = pk.Backend(name="pk_plugin_good", summary="a good plugin")


class GoodClass(pk.Backend):
    def __init__(self) -> None:
        super().__init__(name="pk_plugin_class", summary="made by its class")


def good_factory() -> pk.Backend:
    return pk.Backend(name="pk_plugin_factory", summary="made by a factory")
