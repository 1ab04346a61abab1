"""The one store of measured choices: tuned tables, the user's and shipped ones.

Where entries come from, highest precedence first:

1. the user's own table, ``tuned.json`` in the config directory
   (``$POLYKERNEL_CONFIG_DIR``), written by ``op.tune()`` / ``polykernel tune`` and
   ``polykernel benchmark --save-defaults``;
2. tables a library ships inside its package, registered with
   :func:`register_shipped` (``XLACustomKernel.def_tuned_table``) or through the
   entry-point group ``polykernel.tuned_tables`` (naming a path-like object or a
   function returning one), read on first use;
3. saved defaults of older versions (:mod:`.legacy`), read once, with a
   deprecation warning.

A file is parsed into typed records (:mod:`.records`) once per change (a lowering
costs a ``stat`` per file). A file that is not a table this version reads —
damaged, foreign, newer, not a regular file — is ignored with one
:class:`~polykernel.errors.TuningWarning` naming it and why; a malformed entry is
skipped the same way; a table is never a reason for a call to fail.

Writing the user's table is :mod:`.writing`'s.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import threading
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import KernelTypeError, TuningWarning
from ..settings.paths import config_dir
from . import legacy
from .files import FileProblem, ParsedFiles, link_note
from .records import Entry

__all__ = [
    "ENTRY_POINT_GROUP",
    "FORMAT",
    "VERSION",
    "entries_for",
    "known_primitives",
    "read_table",
    "register_shipped",
    "shipped_paths",
    "tuned_path",
]

FORMAT = "polykernel.tuned"
#: Version 2: entries record the kernels they measured; version 1 is still read
#: (its entries are stale: they did not).
VERSION = 2
FILE_NAME = "tuned.json"
#: Entry points naming shipped tables: ``name = "pkg.module:ATTRIBUTE"``.
ENTRY_POINT_GROUP = "polykernel.tuned_tables"


def tuned_path() -> Path:
    """The user's table (it may not exist).

    Example:
        >>> from polykernel.dispatch.table import tuned_path
        >>> tuned_path().name
        'tuned.json'
    """
    return config_dir() / FILE_NAME


# -- reading ---------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Parsed:
    """What one file holds: its entries per primitive, or why none were read."""

    entries: Mapping[str, tuple[Entry, ...]]
    problem: str | None = None


_EMPTY = Parsed({})
_lock = threading.RLock()
_files: ParsedFiles[Parsed] = ParsedFiles()
_warned: set[tuple[str, str]] = set()
_shipped: list[tuple[str | None, Path]] = []
_entry_points_read = False


_IGNORED = (
    "it is ignored: dispatch uses the other tables and the defaults (calls stay "
    "correct); fix, move or delete it"
)


def _warn(path: Path, why: str, then: str = _IGNORED) -> None:
    with _lock:
        if (str(path), why) in _warned:
            return
        _warned.add((str(path), why))
    warnings.warn(
        f"polykernel tuned table {path}: {why}; {then}.", TuningWarning, stacklevel=4
    )


class NotATable(Exception):
    """Why a text is not a table this version reads (``why``, in words), and the
    version it declares when that is a newer one (``newer``)."""

    def __init__(self, why: str, newer: int | None = None) -> None:
        super().__init__(why)
        self.why, self.newer = why, newer


def document(text: str) -> dict[str, Any]:
    """The raw document of a table's text — its ``entries`` an object — when it is
    one this version reads (this format, version 1 to :data:`VERSION`).

    Raises:
        NotATable: anything else (the reader warns with it, the writer refuses).
    """
    try:
        raw = json.loads(text)
    except RecursionError:
        raise NotATable("it is nested too deeply to be a table") from None
    except ValueError as err:
        raise NotATable(f"it is not valid JSON ({err})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise NotATable(f"it is not a polykernel tuned table (format {FORMAT!r})")
    version = raw.get("version")
    if type(version) is not int or not 1 <= version <= VERSION:
        newer = version if type(version) is int and version > VERSION else None
        raise NotATable(
            f"it is table version {version!r}; this polykernel reads 1 to {VERSION}",
            newer,
        )
    if not isinstance(raw.get("entries"), dict):
        raise NotATable("its 'entries' is not an object")
    return raw


def parse(path: Path, text: str, lazy: bool = False) -> Parsed:
    """The entries of one table's text (problems warned about, once per file and
    cause). ``lazy``: each primitive's entries are parsed, and their problems
    warned about, when first asked for (:class:`_Primitives`)."""
    try:
        primitives = document(text)["entries"]
    except NotATable as err:
        return _problem(path, err.why)
    lists = {n: items for n, items in primitives.items() if isinstance(items, list)}
    bad = [f"{n}: not a list" for n in primitives if n not in lists]
    if lazy:
        if bad:
            _malformed(path, bad)
        return Parsed(_Primitives(path, text, lists))
    found = {}
    for name, items in lists.items():
        found[name], wrong = _entries(path, name, items)
        bad += wrong
    if bad:
        _malformed(path, bad)
    return Parsed({n: es for n, es in found.items() if es})


class _Primitives(Mapping[str, tuple[Entry, ...]]):
    """A table's entries per primitive, each primitive's parsed on first use.

    A shipped table names every primitive of its library, and a process lowers a
    few: parsing one primitive's entries instead of all of them keeps a first
    lowering ~3 ms shorter and the process ~800 objects lighter (the catalog's
    table). The document read to check the file serves the first primitive asked
    for; a later one is read from the text again (once per primitive). The user's
    own table is parsed whole when read, so that every problem in it is reported
    at once: they are the user's to fix.
    """

    def __init__(self, path: Path, text: str, lists: dict[str, list[Any]]) -> None:
        self._path, self._text, self._raw = path, text, lists
        self._names = tuple(lists)
        self._parsed: dict[str, tuple[Entry, ...]] = {}
        self._lock = threading.Lock()

    def __getitem__(self, name: str) -> tuple[Entry, ...]:
        if name not in self._names:
            raise KeyError(name)
        with self._lock:
            found = self._parsed.get(name)
            if found is None:
                raw, self._raw = self._raw, None
                items = (raw or document(self._text)["entries"])[name]
                found, bad = _entries(self._path, name, items)
                if bad:
                    _malformed(self._path, bad)
                self._parsed[name] = found
        return found

    def __contains__(self, name: object) -> bool:  # Mapping's would parse it
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _entries(
    path: Path, name: str, items: list[Any]
) -> tuple[tuple[Entry, ...], list[str]]:
    """The entries of primitive ``name`` that read, and what was wrong with the
    others."""
    found: list[Entry] = []
    bad: list[str] = []
    for item in items:
        try:
            found.append(Entry.from_json(name, item, str(path)))
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            bad.append(f"{name}: {err}")
    return tuple(found), bad


def _malformed(path: Path, bad: list[str]) -> None:
    many = f"{len(bad)} malformed entr{'y' if len(bad) == 1 else 'ies'} skipped"
    _warn(path, f"{many} (first: {bad[0][:120]})", "its other entries are used")


def _problem(path: Path, why: str) -> Parsed:
    _warn(path, why)
    return Parsed({}, why)


def read_table(path: Path) -> Parsed:
    """The entries of one table file (cached until the file changes: one ``stat``
    per lowering); empty when the file is absent or cannot be read as a table."""

    def parse_text(text: str) -> Parsed:
        own = path == tuned_path()
        note = link_note(path)
        if note is not None and own:  # what a save writes through
            _warn(path, f"it is {note}", "it is read through the link, and a save "
                  "replaces the file the link names (the link is kept)")  # fmt: skip
        return parse(path, text, lazy=not own)  # a shipped table: see _Primitives

    try:
        return _files.get(path, parse_text) or _EMPTY
    except FileProblem as err:
        return _problem(path, str(err))


def register_shipped(path: str | os.PathLike, primitive: str | None = None) -> None:
    """Use the table at ``path`` (shipped by a library) for ``primitive`` (None: for
    every primitive it names). The user's own table overrides it.

    Raises:
        KernelTypeError: ``path`` is not a path.

    Example:
        >>> from polykernel.dispatch.table import register_shipped
        >>> register_shipped("/no/such/table.json", "docs.op")  # read on first use
    """
    if not isinstance(path, str | os.PathLike):
        raise KernelTypeError(
            f"polykernel tuned tables: a shipped table is a path (str or "
            f"os.PathLike), got {type(path).__name__}: {path!r}."
        )
    with _lock:
        item = (primitive, Path(path))
        if item not in _shipped:
            _shipped.append(item)


def shipped_paths(primitive: str | None = None) -> list[tuple[str | None, Path]]:
    """The shipped tables registered so far (those of ``primitive`` and those for
    every primitive, or all)."""
    _read_entry_points()
    with _lock:
        return [
            (n, p) for n, p in _shipped if primitive is None or n in (None, primitive)
        ]


def _read_entry_points() -> None:
    global _entry_points_read
    with _lock:
        first, _entry_points_read = not _entry_points_read, True
    if not first:
        return
    try:
        points = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception as err:  # malformed metadata of some installed package
        _skip(f"the entry points of '{ENTRY_POINT_GROUP}' cannot be read", err)
        return
    for point in points:
        try:
            target = point.load()
            target = target() if callable(target) else target
            register_shipped(target)
        except Exception as err:  # a broken plugin must not break dispatch
            _skip(f"the tuned-table entry point '{point.name}' ({point.value})", err)


def _skip(what: str, err: BaseException) -> None:
    warnings.warn(
        f"polykernel: {what} is skipped: {type(err).__name__}: {err}.",
        TuningWarning,
        stacklevel=3,
    )


def known_primitives() -> list[str]:
    """Every primitive any table read here has entries for."""
    names = set(read_table(tuned_path()).entries)
    for _, path in shipped_paths():
        names |= set(read_table(path).entries)
    names |= set(legacy.legacy_entries())
    return sorted(names)


def entries_for(primitive: str) -> list[Entry]:
    """Every entry for ``primitive``: the user's first, then shipped tables' (one
    whose key the user's table also has is left out), then legacy saved defaults."""
    own = list(read_table(tuned_path()).entries.get(primitive, ()))
    seen = {(e.scope, e.key.identity()) for e in own}
    result = own
    for _, path in shipped_paths(primitive):
        for entry in read_table(path).entries.get(primitive, ()):
            if (entry.scope, entry.key.identity()) not in seen:
                seen.add((entry.scope, entry.key.identity()))
                result.append(entry)
    result += legacy.legacy_entries().get(primitive, [])
    return result
