"""Listing the tuned table's entries for ``polykernel tune --show`` and
``polykernel defaults show``: the user's entries and every shipped table's, each
with whether dispatch would use it here.

Shipped tables are registered when the library that ships them is imported, so the
listing first imports the catalog and, for each ``NAME`` given, the module that
defines it (``mylib`` for ``mylib.csrmv``), when it can. An entry of a primitive
this process has loaded is *fresh* (used) or *stale* (its kernels changed since it
was measured: never used, and why); one whose primitive is not loaded here is
listed as *not checked*.
"""

from __future__ import annotations

import contextlib
import importlib
import io

from ..core import registry
from ..dispatch import table
from ..dispatch.lookup import stale_reason
from ..dispatch.records import Entry, Scope
from ._common import plural

__all__ = ["load_libraries", "show_entries"]

WIDTH = 100


def load_libraries(names: list[str]) -> None:
    """Import the catalog and the module of each primitive ``NAME`` not loaded yet,
    so their shipped tables are registered (a module that fails is skipped)."""
    modules = ["polykernel.catalog"]
    for name in names:
        if name not in registry.get_all_primitive_names() and "." in name:
            modules.append(name.rpartition(".")[0])
    for module in dict.fromkeys(modules):
        with contextlib.suppress(Exception), contextlib.redirect_stdout(io.StringIO()):
            importlib.import_module(module)


def _status(entry: Entry) -> str:
    if entry.key.primitive not in registry.get_all_primitive_names():
        return "not checked (primitive not loaded)"
    op = registry.get_primitive(entry.key.primitive)
    why = stale_reason(entry, op._registered(entry.key.platform))
    return "fresh" if why is None else f"STALE: {why}"


def _line(entry: Entry) -> list[str]:
    k = entry.key
    where = "any shape" if k.bucket is None else f"bucket {list(k.bucket)}"
    kind = "saved default" if entry.scope == Scope.SAVED else "tuned"
    head = f"  {k.platform} {where} ({kind}): {entry.winner.label}"
    # A path is printed whole (a cut one cannot be opened); the rest fits WIDTH.
    return [_fit(head), _fit(f"    on {k.device}; {_status(entry)}"),
            f"    from {entry.source}"]  # fmt: skip


def show_entries(names: list[str], scope: Scope | None = None) -> int:
    """Print every entry (of ``names``, or all; of ``scope``, or both) and return
    how many were listed."""
    load_libraries(names)
    print(f"your tuned table: {table.tuned_path()}")
    for _, path in table.shipped_paths():
        print(f"shipped table:    {path}")
    wanted = names or table.known_primitives()
    shown = 0
    for name in wanted:
        entries = [e for e in table.entries_for(name) if scope in (None, e.scope)]
        if not entries:
            continue
        print(_fit(f"{name}: {plural(len(entries), 'entry', 'entries')}"))
        for entry in entries:
            for line in _line(entry):
                print(line)
        shown += len(entries)
    print(plural(shown, "entry", "entries"))
    return shown


def _fit(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"
