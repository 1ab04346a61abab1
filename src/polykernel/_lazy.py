"""A package's public names imported from their modules when first asked for.

Looking up a backend (the dispatch asks every kernel's backend for its packages when
it checks a tuned entry) imports ``polykernel.backends.<name>``; a package that
imported its kernel modules eagerly made that cost tens of milliseconds at a warm
process's first lowering. Each backend package (and the launcher) declares its names
here instead, in one way::

    __getattr__, __dir__ = lazy_names(__name__, {"warp_kernel": "kernel", ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name of ``names`` (name ->
    its module, relative to the package) is imported on first use, then kept in the
    package's namespace so later lookups skip the hook."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute '{name}'")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
