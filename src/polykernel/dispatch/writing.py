"""Writing the user's tuned table: only a table this version owns, nothing lost.

:func:`record_entries` and :func:`clear_entries` rewrite the user's table only when
it is one this version owns — absent, or of this format at this version or an
older one — under the config directory's lock, atomically, keeping every entry
they do not replace exactly as it was (even one the reader could not parse).
Anything else — a damaged, foreign or newer table, something that is not a
regular file, a directory that cannot be written — is refused with a
:class:`~polykernel.errors.TuningError` that says what is there and what to do;
:func:`check_writable` raises the same error before a tuning run measures
anything. Through a symbolic link, the file the link names is replaced.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from ..errors import CacheError, TuningError
from ..settings.paths import CONFIG_ENV, ensure_private_dir
from .files import FileProblem, locked, read_regular, write_json, write_target
from .records import Entry, Scope
from .table import FORMAT, VERSION, NotATable, document, read_table, tuned_path

__all__ = [
    "check_writable",
    "clear_entries",
    "entry_json",
    "export_entries",
    "own_entries",
    "record_entries",
    "replace_entries",
]


def _refuse(path: Path, why: str, fix: str) -> TuningError:
    return TuningError(
        f"polykernel tuned table {path}: {why}; it is not rewritten. {fix}"
    )


def _owned_document(path: Path) -> dict[str, Any]:
    """The raw document a write starts from, when ``path`` is a table this version
    owns (absent, or this format at version <= ours); else a TuningError."""
    move = (
        f"Move it away (or delete it), or point ${CONFIG_ENV} at another directory, "
        f"or tune with save=False (--no-save)."
    )
    try:
        write_target(path)
        found = read_regular(path)
    except FileProblem as err:
        raise _refuse(path, str(err), move) from None
    if found is None:
        return {"format": FORMAT, "version": VERSION, "entries": {}}
    try:
        entries = document(found[0])["entries"]
    except NotATable as err:
        if err.newer is None:
            raise _refuse(path, err.why, move) from None
        raise _refuse(
            path,
            f"it was written by a newer polykernel (table version {err.newer}; this "
            f"one writes {VERSION})",
            "Upgrade polykernel, or " + move[0].lower() + move[1:],
        ) from None
    kept = {"format": FORMAT, "version": VERSION, "entries": dict(entries)}
    others = json.loads(found[0]).get("others")  # kept by a merge (see .merge)
    if isinstance(others, list):
        kept["others"] = others
    return kept


def check_writable(path: Path | None = None) -> Path:
    """Raise the TuningError a save to the user's table would meet, before anything
    is measured: the config directory cannot be made or written, or the table is
    not one this version may rewrite. Returns the table's path."""
    path = tuned_path() if path is None else path
    directory = path.parent
    probe = directory
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        what = (
            f"the config directory {directory} is not a directory"
            if probe == directory
            else f"the config directory {directory} cannot be made: {probe} is not "
            f"a directory"
        )
        raise TuningError(
            f"polykernel tuned table: {what}. Remove it, or point ${CONFIG_ENV} at a "
            f"directory you own, or tune with save=False (--no-save)."
        )
    if probe == directory:
        try:  # an existing directory: owned by this user, not writable by others
            ensure_private_dir(directory, env=CONFIG_ENV)
        except CacheError as err:
            raise TuningError(f"{err} (Or tune with save=False.)") from err
    if not os.access(probe, os.W_OK | os.X_OK):
        raise TuningError(
            f"polykernel tuned table: cannot write to {probe} (the config directory "
            f"{directory} {'is' if probe == directory else 'would be'} there, and it "
            f"is read-only). Point ${CONFIG_ENV} at a writable directory you own, or "
            f"tune with save=False (--no-save)."
        )
    _owned_document(path)
    target = write_target(path)
    if target.parent != directory and not os.access(target.parent, os.W_OK | os.X_OK):
        raise TuningError(
            f"polykernel tuned table {path}: it links to {target}, in a directory "
            f"this process cannot write. Fix the link, or tune with save=False."
        )
    return path


def _raw_identity(name: str, raw: Any) -> tuple[Any, ...] | None:
    try:
        entry = Entry.from_json(name, raw, "")
    except (ValueError, TypeError, KeyError, AttributeError):
        return None  # kept as it is: a write never drops what it cannot read
    return (entry.scope, entry.key.identity())


def _rewrite(path: Path, change: Any) -> Any:
    try:
        with locked(path):
            document = _owned_document(path)
            result = change(document["entries"])
            if result is not None:
                write_json(path, document)
            return result
    except CacheError as err:
        raise TuningError(str(err)) from err
    except FileProblem as err:  # changed since it was read
        raise TuningError(
            f"polykernel tuned table {path}: {err}; it is not rewritten."
        ) from None
    except OSError as err:
        raise TuningError(
            f"polykernel tuned table {path}: cannot write it ({err.strerror}). Point "
            f"${CONFIG_ENV} at a writable directory you own."
        ) from err
    except (RecursionError, ValueError) as err:  # a kept entry JSON cannot write
        raise TuningError(
            f"polykernel tuned table {path}: cannot write it ({type(err).__name__}: "
            f"{str(err)[:80]}); it is left as it was. Move it away (or delete it)."
        ) from None


def record_entries(new: Iterable[Entry]) -> Path:
    """Merge ``new`` into the user's table (an entry with the same key and scope
    replaces the old one; every other entry is kept as it was) and return its path.

    Raises:
        TuningError: the table cannot be written, or is not one this version owns,
            or an entry would not read back as itself (nothing is written).
    """
    path = tuned_path()
    written = [(e, entry_json(e)) for e in new]

    def change(entries: dict[str, Any]) -> bool:
        for entry, raw in written:
            name = entry.key.primitive
            mine = (entry.scope, entry.key.identity())
            kept = [
                r for r in _list(entries.get(name)) if _raw_identity(name, r) != mine
            ]
            entries[name] = [*kept, raw]
        return True

    _rewrite(path, change)
    return path


def own_entries() -> dict[str, Any]:
    """The raw entries of the user's table (``{primitive: [entry, ...]}``, each as
    it is on disk), to be merged into a job's table.

    Raises:
        TuningError: the table is not one this version may rewrite.
    """
    path = tuned_path()
    try:
        with locked(path):
            return dict(_owned_document(path)["entries"])
    except CacheError as err:
        raise TuningError(str(err)) from err


def replace_entries(entries: dict[str, Any]) -> Path:
    """Make the user's table hold exactly ``entries`` (a job's merged table: the
    same bytes on every process that writes it) and return its path.

    Raises:
        TuningError: the table cannot be written, or is not one this version owns.
    """
    path = tuned_path()

    def change(current: dict[str, Any]) -> bool:
        current.clear()
        current.update(entries)
        return True

    _rewrite(path, change)
    return path


def entry_json(entry: Entry) -> dict[str, Any]:
    """``entry``'s JSON form, once it is known to read back (a table never holds
    what its reader would skip: NumPy values, lists, NaN...)."""
    name = entry.key.primitive
    try:
        raw = entry.to_json()
        Entry.from_json(name, json.loads(json.dumps(raw)), "")
    except (TypeError, ValueError, RecursionError) as err:
        raise TuningError(
            f"polykernel tuned table: the entry of '{name}' choosing "
            f"{entry.winner.label} cannot be written ({type(err).__name__}: "
            f"{str(err)[:120]}); nothing was written. Launch parameters and measured "
            f"numbers must be values a table holds exactly (bools, ints, finite "
            f"floats, strings, tuples of these)."
        ) from None
    return raw


def _list(raw: Any) -> list[Any]:
    return list(raw) if isinstance(raw, list) else []


def clear_entries(
    primitives: Iterable[str] | None = None, scope: Scope | None = None
) -> list[str]:
    """Forget the user's entries — all, or those of ``primitives``; of every scope,
    or of ``scope`` only — and return the primitives that had some. The file is
    not created when absent.

    Raises:
        TuningError: the table is not one this version may rewrite.
    """
    path = tuned_path()
    if not path.exists() and not path.is_symlink():
        return []
    wanted = None if primitives is None else set(primitives)

    def change(entries: dict[str, Any]) -> list[str] | None:
        removed = []
        for name in sorted(entries):
            if wanted is not None and name not in wanted:
                continue
            items = _list(entries[name])
            kept = [r for r in items if scope is not None and not _in_scope(r, scope)]
            if len(kept) != len(items):
                removed.append(name)
            if kept:
                entries[name] = kept
            else:
                entries.pop(name)
        return removed or None

    return _rewrite(path, change) or []


def _in_scope(raw: Any, scope: Scope) -> bool:
    return isinstance(raw, dict) and raw.get("scope", Scope.TUNED.value) == scope.value


def export_entries(
    target: str | os.PathLike, primitives: Sequence[str] | None = None
) -> int:
    """Write the user's entries (all, or those of ``primitives``) as a table a
    library can ship; return how many entries were written.

    Raises:
        TuningError: the user's table cannot be read, or ``target`` written.
    """
    parsed = read_table(tuned_path())
    if parsed.problem is not None:
        raise TuningError(
            f"polykernel tune --export: your table {tuned_path()} cannot be read: "
            f"{parsed.problem}."
        )
    names = set(parsed.entries) if primitives is None else set(primitives)
    chosen = {
        n: [e.to_json() for e in es] for n, es in parsed.entries.items() if n in names
    }
    document = {
        "format": FORMAT,
        "version": VERSION,
        "entries": dict(sorted(chosen.items())),
    }
    out = Path(target)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_json(out, document)
    except (OSError, FileProblem) as err:
        raise TuningError(
            f"polykernel tune --export: cannot write {out} ({err})."
        ) from err
    return sum(len(es) for es in chosen.values())
