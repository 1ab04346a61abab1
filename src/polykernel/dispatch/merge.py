"""Tables combined: a job's processes' tables, or tables from many machines.

Two entries are the *same case* when their scope and key identity (platform,
device kind, signature, bucket) are equal. :func:`union` keeps, for each case,
the entry of the first table that has one (a job's merge: the lowest process
first). :func:`merge_tables` (``polykernel tune --merge A.json B.json -o OUT``)
does the same for files, and loses nothing: every entry carries its provenance
(the file it came from, with the machine, date and versions it recorded), and
where two files' entries for one case choose different winners, the later ones
are kept in the output's ``others`` list (which readers ignore; the
conflicting ones are reported).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .files import FileProblem, read_regular
from .records import Entry, Key
from .table import FORMAT, VERSION, NotATable, document

__all__ = ["Conflict", "Merged", "case_of", "merge_tables", "union"]


def case_of(name: str, raw: Any) -> str:
    """The case an entry answers, as a string (an entry that does not parse is a
    case of its own: it is kept, never merged away)."""
    try:
        entry = Entry.from_json(name, raw, "")
    except (ValueError, TypeError, KeyError, AttributeError):
        return "unparsed:" + json.dumps(raw, sort_keys=True, default=str)
    return json.dumps([entry.scope.value, *_identity(entry.key)], default=str)


def _identity(key: Key) -> list[Any]:
    return [key.platform, key.device, key.signature, key.bucket]


def union(tables: Sequence[Mapping[str, Sequence[Any]]]) -> dict[str, list[Any]]:
    """``{primitive: [entry, ...]}`` holding, for each case, the first table's
    entry (tables in precedence order; entries as raw JSON)."""
    merged: dict[str, dict[str, Any]] = {}
    for table in tables:
        for name, items in table.items():
            if not isinstance(items, list | tuple):
                continue
            cases = merged.setdefault(name, {})
            for raw in items:
                cases.setdefault(case_of(name, raw), raw)
    return {name: list(cases.values()) for name, cases in sorted(merged.items())}


@dataclasses.dataclass(frozen=True)
class Conflict:
    """One case whose entries in different files choose different winners."""

    primitive: str
    case: str
    winners: tuple[tuple[str, str], ...]  # (file, winner label), first kept

    def line(self) -> str:
        kept, *others = self.winners
        rest = "; ".join(f"{w} in {f}" for f, w in others)
        return (
            f"{self.primitive}: {_describe(self.case)}: kept {kept[1]} from "
            f"{kept[0]}; also {rest}"
        )


def _describe(case: str) -> str:
    try:
        scope, platform, device, _, bucket = json.loads(case)
    except ValueError:
        return "an unparsed entry"
    shape = "any shape" if bucket is None else f"bucket {bucket}"
    return f"{platform} {device} {shape} ({scope})"


@dataclasses.dataclass
class Merged:
    """The merged document, what it was made of and the conflicts found."""

    document: dict[str, Any]
    entries: int
    conflicts: list[Conflict]


def _winner(name: str, raw: Any) -> str:
    try:
        return Entry.from_json(name, raw, "").winner.label
    except (ValueError, TypeError, KeyError, AttributeError):
        return "(unparsed)"


def _read(path: Path) -> dict[str, Any]:
    try:
        found = read_regular(path)
    except FileProblem as err:
        raise ValueError(f"{path}: {err}") from None
    if found is None:
        raise ValueError(f"{path}: no such file")
    try:
        return document(found[0])
    except NotATable as err:
        raise ValueError(f"{path}: {err.why}") from None


def merge_tables(paths: Sequence[str | Path]) -> Merged:
    """Combine the tables at ``paths`` (earlier files first for a case).

    Raises:
        ValueError: a file is absent or not a table this version reads (the
            message names it and why).
    """
    kept: dict[str, dict[str, tuple[str, Any]]] = {}
    extra: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], list[tuple[str, str]]] = {}
    total = 0
    for path in map(Path, paths):
        raw_document = _read(path)
        for name, items in sorted(raw_document["entries"].items()):
            for raw in items if isinstance(items, list) else []:
                total += 1
                if isinstance(raw, dict):
                    recorded = raw.get("recorded")
                    recorded = dict(recorded) if isinstance(recorded, dict) else {}
                    recorded.setdefault("table", str(path))
                    raw = {**raw, "recorded": recorded}
                case = case_of(name, raw)
                seen.setdefault((name, case), []).append(
                    (str(path), _winner(name, raw))
                )
                cases = kept.setdefault(name, {})
                if case in cases:
                    extra.append({"primitive": name, "case": case, "entry": raw,
                                  "table": str(path)})  # fmt: skip
                else:
                    cases[case] = (str(path), raw)
        extra += [c for c in raw_document.get("others", []) if isinstance(c, dict)]
    conflicts = [
        Conflict(name, case, tuple(winners))
        for (name, case), winners in seen.items()
        if len({w for _, w in winners}) > 1
    ]
    entries = {
        name: [raw for _, raw in cases.values()] for name, cases in sorted(kept.items())
    }
    merged = {"format": FORMAT, "version": VERSION, "entries": entries}
    if extra:
        merged["others"] = extra
    return Merged(merged, total, conflicts)
