"""Tuned dispatch tables: which backend and launch parameters measured fastest.

Each entry is one measured case of one primitive: its *key* (platform, the machine
class it ran on, the call's signature — input dtypes and ranks, the categorical
static keywords — and its shape bucket) and what the tuning found: the fastest
choice overall, the fastest of each backend, and every candidate's time or error.

Where tables come from, highest precedence first:

1. the user's own table, ``tuned.json`` in the config directory, written by
   ``op.tune()`` / ``polykernel tune`` under the same lock and atomic replace as
   ``defaults.json`` (:mod:`.json_file`);
2. tables a library ships inside its package, registered with
   :func:`register_shipped` (a call, e.g. from ``XLACustomKernel.def_tuned_table``)
   or through the entry-point group ``polykernel.tuned_tables`` (the entry point
   names a path-like object or a function returning one), read on first use.

A file that is not a table of this format and version (damaged, foreign, newer) is
ignored with one :class:`~polykernel.errors.TuningWarning` naming it; a table is never
a reason for a call to fail. Reading is cached per file (by size and modification
time), so a lowering costs a ``stat`` per file. Nothing is read at import.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import os
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import KernelTypeError, TuningWarning
from .json_file import locked, read_text, write_json
from .paths import config_dir

__all__ = [
    "ENTRY_POINT_GROUP",
    "Choice",
    "Key",
    "TunedEntry",
    "clear_entries",
    "entries_for",
    "export_entries",
    "record_entries",
    "register_shipped",
    "tuned_path",
    "user_primitives",
]

FORMAT = "polykernel.tuned"
VERSION = 1
FILE_NAME = "tuned.json"
#: Entry points naming shipped tables: ``name = "pkg.module:ATTRIBUTE"``.
ENTRY_POINT_GROUP = "polykernel.tuned_tables"


@dataclasses.dataclass(frozen=True)
class Choice:
    """One (backend, parameters) and its measured median time and spread."""

    backend: str
    params: tuple[tuple[str, Any], ...]
    median_s: float
    spread: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "params": dict(self.params),
            "median_s": self.median_s,
            "spread": self.spread,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Choice:
        params = raw.get("params", {})
        if not isinstance(raw["backend"], str) or not isinstance(params, dict):
            raise ValueError("a choice needs a backend name and a params object")
        return cls(
            str(raw["backend"]),
            tuple(sorted(params.items())),
            float(raw["median_s"]),
            float(raw.get("spread", 0.0)),
        )


@dataclasses.dataclass(frozen=True)
class Key:
    """What a tuned entry is looked up by (see :mod:`polykernel.core.dispatch`).

    Attributes:
        primitive: the primitive's name.
        platform: ``cpu`` / ``gpu`` / ``tpu``.
        device: the device kind (CPU model name, GPU name).
        family: the wider class (CPU instruction set, GPU compute capability).
        signature: input dtypes and ranks and the categorical static keywords, as
            one canonical string.
        bucket: the shape bucket (per dimension: ``ceil(log2(size))``, unless the
            primitive buckets its own way).
    """

    primitive: str
    platform: str
    device: str
    family: str
    signature: str
    bucket: tuple[int, ...]

    def identity(self) -> tuple[Any, ...]:
        return (self.platform, self.device, self.signature, self.bucket)


@dataclasses.dataclass(frozen=True)
class TunedEntry:
    """One measured case: its key, the winner, each backend's best, and the rest.

    ``candidates`` holds every candidate as measured (JSON objects: backend,
    params, median/spread or the error); ``recorded`` the shape measured, the
    machine, library versions and date. ``source`` is the file it was read from.
    """

    key: Key
    best: Choice
    per_backend: Mapping[str, Choice]
    candidates: tuple[Mapping[str, Any], ...] = ()
    recorded: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        k = self.key
        return {
            "platform": k.platform,
            "device": k.device,
            "family": k.family,
            "signature": k.signature,
            "bucket": list(k.bucket),
            "best": self.best.to_json(),
            "per_backend": {b: c.to_json() for b, c in self.per_backend.items()},
            "candidates": [dict(c) for c in self.candidates],
            "recorded": dict(self.recorded),
        }

    @classmethod
    def from_json(
        cls, primitive: str, raw: Mapping[str, Any], source: str
    ) -> TunedEntry:
        bucket = raw["bucket"]
        if not isinstance(bucket, list) or not all(type(b) is int for b in bucket):
            raise ValueError("bucket must be a list of ints")
        strings = [raw[f] for f in ("platform", "device", "family", "signature")]
        if not all(isinstance(s, str) for s in strings):
            raise ValueError("platform, device, family and signature must be strings")
        platform, device, family, signature = strings
        key = Key(primitive, platform, device, family, signature, tuple(bucket))
        per = {str(b): Choice.from_json(c) for b, c in raw["per_backend"].items()}
        return cls(
            key,
            Choice.from_json(raw["best"]),
            per,
            tuple(raw.get("candidates", ())),
            dict(raw.get("recorded", {})),
            source,
        )


def tuned_path() -> Path:
    """The user's table (it may not exist).

    Example:
        >>> from polykernel.settings.tuned_table import tuned_path
        >>> from polykernel.settings.tuned_table import tuned_path
        >>> tuned_path().name
        'tuned.json'
    """
    return config_dir() / FILE_NAME


# -- reading ---------------------------------------------------------------------------
_lock = threading.RLock()
_cache: dict[str, tuple[tuple[int, int], dict[str, list[TunedEntry]]]] = {}
_warned: set[tuple[str, str]] = set()
_shipped: list[tuple[str | None, Path]] = []
_entry_points_read = False


def _warn(path: Path, why: str) -> None:
    with _lock:
        if (str(path), why) in _warned:
            return
        _warned.add((str(path), why))
    warnings.warn(
        f"polykernel: ignoring the tuned table {path}: {why}. Dispatch falls back to "
        f"other tables and the defaults; fix or delete it (`polykernel tune "
        f"--clear` for your own table).",
        TuningWarning,
        stacklevel=4,
    )


def _parse(path: Path, text: str) -> dict[str, list[TunedEntry]]:
    try:
        raw = json.loads(text)
    except ValueError as err:
        _warn(path, f"not valid JSON ({err})")
        return {}
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        _warn(path, f"not a polykernel tuned table (expected format {FORMAT!r})")
        return {}
    if raw.get("version") != VERSION:
        _warn(
            path,
            f"table version {raw.get('version')!r}, this polykernel reads "
            f"version {VERSION}",
        )
        return {}
    found: dict[str, list[TunedEntry]] = {}
    bad = 0
    primitives = raw.get("entries")
    if not isinstance(primitives, dict):
        _warn(path, "its 'entries' is not an object")
        return {}
    for name, entries in primitives.items():
        if not isinstance(entries, list):
            bad += 1  # one malformed "entry": the primitive's whole list
            continue
        for item in entries:
            try:
                found.setdefault(name, []).append(
                    TunedEntry.from_json(name, item, str(path))
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                bad += 1
    if bad:
        _warn(path, f"{bad} malformed entr{'y' if bad == 1 else 'ies'} skipped")
    return found


def _read(path: Path) -> dict[str, list[TunedEntry]]:
    """The entries of one table file, cached by (size, mtime); {} when absent."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return {}
    except OSError as err:
        _warn(path, f"cannot stat it ({err.strerror})")
        return {}
    stamp = (info.st_size, info.st_mtime_ns)
    with _lock:
        cached = _cache.get(str(path))
        if cached is not None and cached[0] == stamp:
            return cached[1]
    try:
        text = read_text(path) or ""
    except (OSError, UnicodeDecodeError) as err:
        _warn(path, f"cannot read it ({err})")
        return {}
    parsed = _parse(path, text)
    with _lock:
        _cache[str(path)] = (stamp, parsed)
    return parsed


def register_shipped(path: str | os.PathLike, primitive: str | None = None) -> None:
    """Use the table at ``path`` (shipped by a library) for ``primitive`` (None: for
    every primitive it names). The user's own table overrides it.

    Raises:
        KernelTypeError: ``path`` is not a path.

    Example:
        >>> from polykernel.settings.tuned_table import register_shipped
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


def user_primitives() -> list[str]:
    """The primitives the user's table has entries for."""
    return sorted(_read(tuned_path()))


def entries_for(primitive: str) -> list[TunedEntry]:
    """Every entry for ``primitive``: the user's first, then shipped tables' (an
    entry of a shipped table whose key the user's table also has is left out)."""
    _read_entry_points()
    own = _read(tuned_path()).get(primitive, [])
    seen = {e.key.identity() for e in own}
    with _lock:
        shipped = [p for name, p in _shipped if name in (None, primitive)]
    result = list(own)
    for path in shipped:
        for entry in _read(path).get(primitive, []):
            if entry.key.identity() not in seen:
                seen.add(entry.key.identity())
                result.append(entry)
    return result


# -- writing ---------------------------------------------------------------------------
def _load_for_write(path: Path) -> dict[str, list[dict[str, Any]]]:
    parsed = _read(path)
    return {n: [e.to_json() for e in es] for n, es in parsed.items()}


def _document(entries: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "entries": {n: list(es) for n, es in sorted(entries.items()) if es},
    }


def record_entries(new: Iterable[TunedEntry]) -> Path:
    """Merge ``new`` into the user's table (an entry with the same key replaces the
    old one) and return its path."""
    path = tuned_path()
    with locked(path):
        data = _load_for_write(path)
        for entry in new:
            kept = [
                e
                for e in data.get(entry.key.primitive, [])
                if _identity(e) != entry.key.identity()
            ]
            data[entry.key.primitive] = [*kept, entry.to_json()]
        return write_json(path, _document(data))


def _identity(raw: Mapping[str, Any]) -> tuple[Any, ...]:
    return (raw["platform"], raw["device"], raw["signature"], tuple(raw["bucket"]))


def clear_entries(primitives: Iterable[str] | None = None) -> list[str]:
    """Forget the user's tuned entries, all or those of ``primitives``; return the
    primitives removed. The file is not created when absent."""
    path = tuned_path()
    if not path.exists():
        return []
    with locked(path):
        data = _load_for_write(path)
        wanted = sorted(data) if primitives is None else list(primitives)
        removed = [n for n in wanted if data.pop(n, None) is not None]
        write_json(path, _document(data))
    return removed


def export_entries(
    target: str | os.PathLike, primitives: Iterable[str] | None = None
) -> int:
    """Write the user's entries (all, or those of ``primitives``) as a table a
    library can ship; return how many entries were written."""
    data = _load_for_write(tuned_path())
    if primitives is not None:
        names = set(primitives)
        data = {n: es for n, es in data.items() if n in names}
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_document(data), indent=2, sort_keys=True) + "\n")
    return sum(len(es) for es in data.values())
