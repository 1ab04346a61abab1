"""Saved defaults of older versions (``defaults.json``), read as table entries.

Before one table held every measured choice, ``polykernel benchmark
--save-defaults`` wrote ``{primitive: {platform: backend}}`` to ``defaults.json`` in
the config directory. A file left by those versions is still honoured: it is read
once per process (again only if it changes), each pair becoming a saved-default
entry for any device, shape and signature (:class:`~.records.Scope` ``SAVED``),
with one :class:`~polykernel.errors.PolykernelDeprecationWarning` saying where
saved defaults live now. Nothing writes this file any more;
:func:`clear_legacy` removes pairs from it (``polykernel defaults clear``,
``polykernel tune --clear``) and deletes it once it is empty.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path

from ..errors import PolykernelDeprecationWarning, TuningWarning
from ..settings.paths import config_dir
from .files import (
    FileProblem,
    ParsedFiles,
    locked,
    read_regular,
    stamp_regular,
    write_json,
)
from .records import ANY, Choice, Entry, Key, Scope

__all__ = ["clear_legacy", "legacy_entries", "legacy_path"]

FILE_NAME = "defaults.json"

_lock = threading.Lock()
_files: ParsedFiles[dict[str, list[Entry]]] = ParsedFiles()
_warned: set[str] = set()


def legacy_path() -> Path:
    """Where older versions saved defaults (it may not exist)."""
    return config_dir() / FILE_NAME


def _warn_once(key: str, message: str, category: type[Warning]) -> None:
    """Warn unless ``key`` was warned about in this process: a damaged file's key
    is its message (the file and its problem), so the same file damaged another
    way is warned about again."""
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, category, stacklevel=5)


def _pairs(raw: object) -> list[tuple[str, str, str]]:
    if not isinstance(raw, dict):
        raise ValueError("expected an object {primitive: {platform: backend}}")
    found = []
    for name, per_platform in raw.items():
        if not isinstance(per_platform, dict):
            continue
        for platform, backend in per_platform.items():
            if (
                isinstance(platform, str)
                and platform
                and isinstance(backend, str)
                and backend
            ):
                found.append((str(name), platform, backend))
    return found


def legacy_entries() -> dict[str, list[Entry]]:
    """The legacy file's pairs as saved-default entries, per primitive ({} when the
    file is absent; a damaged one is one TuningWarning and {})."""
    path = legacy_path()
    try:
        return _files.get(path, lambda text: _entries(path, text)) or {}
    except FileProblem as err:
        message = (
            f"polykernel saved defaults {path}: {err}; they are ignored. Move it "
            f"away or delete it."
        )
        _warn_once(message, message, TuningWarning)
        return {}


def _entries(path: Path, text: str) -> dict[str, list[Entry]]:
    try:
        pairs = _pairs(json.loads(text))
    except (ValueError, RecursionError) as err:
        message = (
            f"polykernel saved defaults {path}: not a saved-defaults file "
            f"({str(err)[:80]}); it is ignored. Delete it (`polykernel defaults "
            f"clear` does)."
        )
        _warn_once(message, message, TuningWarning)
        pairs = []
    entries: dict[str, list[Entry]] = {}
    for name, platform, backend in pairs:
        key = Key(name, platform, ANY, ANY, ANY, None)
        entry = Entry(key, Scope.SAVED, Choice(backend), kernels=None, source=str(path))
        entries.setdefault(name, []).append(entry)
    if entries:
        _warn_once(
            str(path),
            f"polykernel: {path} holds saved defaults of an older polykernel; they "
            f"are used as saved-default entries of the tuned table (deprecated). "
            f"Save them again with `polykernel benchmark ... --save-defaults`, which "
            f"writes {config_dir() / 'tuned.json'}, then `polykernel defaults "
            f"clear` removes the old file.",
            PolykernelDeprecationWarning,
        )
    return entries


def clear_legacy(primitives: Iterable[str] | None = None) -> list[str]:
    """Remove the pairs of ``primitives`` (all when None) from the legacy file,
    deleting it once it holds none; return the primitives removed."""
    path = legacy_path()
    if not path.exists():
        return []
    with locked(path):
        try:
            if stamp_regular(path) is None:
                return []
        except FileProblem:
            return []  # not a file of ours: reading it already warned
        try:
            found = read_regular(path)
            raw = json.loads(found[0]) if found else {}
        except (FileProblem, ValueError, RecursionError):
            raw = None
        if not isinstance(raw, dict):
            # A damaged saved-defaults file, which nothing reads: clearing every
            # saved default removes it (a name only clears what it can read).
            if primitives is None:
                os.unlink(path)
            return []
        wanted = set(raw) if primitives is None else set(primitives)
        removed = sorted(n for n in wanted if n in raw)
        for name in removed:
            del raw[name]
        if not removed:
            return []
        if raw:
            write_json(path, raw)
        else:
            os.unlink(path)
    return removed
