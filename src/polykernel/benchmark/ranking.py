"""Which record is fastest: the one ranking rule every table, query and file shares.

A record built by our runner knows its median; one built the reference way (or read
from a reference file) knows only mean, std and min. Within one set of records the
median ranks when every successful record has one, otherwise the mean does, so two
records are never compared by different statistics when both statistics exist.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, TypeGuard

from .record import BenchmarkRecord

__all__ = [
    "Mismatch",
    "best_backends",
    "fastest",
    "fastest_per_config",
    "is_known",
    "mismatches",
    "rank_field",
    "rank_ms",
]


class Mismatch(NamedTuple):
    """A backend whose output disagreed with the reference on one config."""

    primitive: str
    platform: str
    label: str
    backend: str
    reference: str
    max_abs_diff: float | None


def is_known(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a real number (not ``None``, not NaN, not a bool).

    Example:
        >>> from polykernel.benchmark.ranking import is_known
        >>> is_known(1.5), is_known(None), is_known(float("nan"))
        (True, False, False)
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not math.isnan(value)


def rank_field(records: Iterable[BenchmarkRecord]) -> str:
    """``'median_ms'`` if every successful record has a median, else ``'mean_ms'``.

    Example:
        >>> from polykernel.benchmark.ranking import rank_field
        >>> from polykernel import BenchmarkRecord
        >>> rank_field([BenchmarkRecord("cpu", "a", "x", mean_ms=1.0)])
        'mean_ms'
    """
    ok = [r for r in records if r.success]
    if ok and all(is_known(r.median_ms) for r in ok):
        return "median_ms"
    return "mean_ms"


def rank_ms(rec: BenchmarkRecord, field: str) -> float | None:
    """The time ``rec`` ranks by: ``field``, else its other central statistic.

    Failed records and records without a known time rank nowhere (``None``).
    """
    if not rec.success:
        return None
    other = "mean_ms" if field == "median_ms" else "median_ms"
    for name in (field, other):
        value = getattr(rec, name)
        if is_known(value):
            return float(value)
    return None


def _best(pool: Sequence[BenchmarkRecord]) -> BenchmarkRecord | None:
    field = rank_field(pool)
    timed = [
        (t, i, r) for i, r in enumerate(pool) if (t := rank_ms(r, field)) is not None
    ]
    return min(timed)[2] if timed else None


def fastest(
    records: Iterable[BenchmarkRecord], label: str | None = None
) -> BenchmarkRecord | None:
    """The fastest successful record, overall or for one config ``label``.

    Ties go to the record that comes first.

    Example:
        >>> from polykernel import BenchmarkRecord
        >>> from polykernel.benchmark.ranking import fastest
        >>> recs = [BenchmarkRecord("cpu", "a", "x", mean_ms=2.0),
        ...         BenchmarkRecord("cpu", "b", "x", mean_ms=1.0)]
        >>> fastest(recs).backend
        'b'
    """
    return _best([r for r in records if label is None or r.label == label])


def fastest_per_config(
    records: Iterable[BenchmarkRecord],
) -> dict[tuple[str, str], BenchmarkRecord]:
    """``{(primitive, label): fastest record}`` for every config with a timed record."""
    groups: dict[tuple[str, str], list[BenchmarkRecord]] = {}
    for r in records:
        groups.setdefault((r.primitive, r.label), []).append(r)
    best = {key: _best(pool) for key, pool in groups.items()}
    return {key: rec for key, rec in best.items() if rec is not None}


def mismatches(records: Iterable[BenchmarkRecord]) -> list[Mismatch]:
    """Every (config, backend) whose output disagreed with the reference."""
    return [
        Mismatch(
            r.primitive,
            r.platform,
            r.label,
            r.backend,
            r.reference_backend or "",
            r.max_abs_diff,
        )
        for r in records
        if r.matches_reference is False
    ]


def best_backends(records: Iterable[BenchmarkRecord]) -> dict[str, dict[str, str]]:
    """Pick one default backend per (primitive, platform).

    A candidate must have a time on every config of its group and never disagreed
    with the reference; among those the lowest geometric-mean slowdown relative to
    the per-config best wins.
    """
    groups: dict[tuple[str, str], list[BenchmarkRecord]] = {}
    for r in records:
        groups.setdefault((r.primitive, r.platform), []).append(r)
    chosen: dict[str, dict[str, str]] = {}
    for (prim, platform), recs in groups.items():
        backend = _pick_backend(recs)
        if backend is not None and prim:
            chosen.setdefault(prim, {})[platform] = backend
    return chosen


def _pick_backend(recs: list[BenchmarkRecord]) -> str | None:
    field = rank_field(recs)
    times = {id(r): rank_ms(r, field) for r in recs}
    labels = {r.label for r in recs}
    best: dict[str, float] = {}
    for r in recs:
        t = times[id(r)]
        if t is not None and t > 0:
            best[r.label] = min(best.get(r.label, math.inf), t)
    scores: dict[str, float] = {}
    for backend in dict.fromkeys(r.backend for r in recs):
        mine = [r for r in recs if r.backend == backend]
        ok = all((times[id(r)] or 0) > 0 for r in mine) and all(
            r.matches_reference is not False for r in mine
        )
        if not ok or {r.label for r in mine} != labels:
            continue
        # every time is > 0 here (checked above): `or 0` only tells the checker
        logs = [math.log((times[id(r)] or 0) / best[r.label]) for r in mine]
        scores[backend] = sum(logs) / len(logs)
    return min(scores, key=scores.__getitem__) if scores else None
