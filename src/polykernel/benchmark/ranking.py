"""Which record is fastest: the one ranking rule every table, query and file shares.

A record built by our runner knows its median; one built the reference way (or read
from a reference file) knows only mean, std and min. Within one set of records the
median ranks when every successful record has one, otherwise the mean does, so two
records are never compared by different statistics when both statistics exist.

Choosing a default from records (:func:`best_backends`, what ``--save-defaults``
saves) goes through the one rule of :mod:`polykernel.dispatch.ranking`, the
tuner's: ties within the measured spread keep the registered default.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeGuard

from ..dispatch.ranking import Scored, choose, interval_error
from .record import BenchmarkRecord

__all__ = [
    "Mismatch",
    "backend_scores",
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


def best_backends(
    records: Iterable[BenchmarkRecord],
    defaults: Mapping[tuple[str, str], str] | None = None,
) -> dict[str, dict[str, str]]:
    """Pick one default backend per (primitive, platform), by the one rule of
    :mod:`polykernel.dispatch.ranking`.

    A candidate must have a time on every config of its group and never disagreed
    with the reference; its ratio is its geometric-mean slowdown relative to the
    per-config best. Backends whose ratios differ by less than the measurements
    resolve are tied: the registered default (``defaults[(primitive, platform)]``,
    when known) is kept among them, else the first in the records' order.
    """
    groups: dict[tuple[str, str], list[BenchmarkRecord]] = {}
    for r in records:
        groups.setdefault((r.primitive, r.platform), []).append(r)
    chosen: dict[str, dict[str, str]] = {}
    for (prim, platform), recs in groups.items():
        default = (defaults or {}).get((prim, platform))
        picked = choose(backend_scores(recs), default=default)
        if picked is not None and prim:
            chosen.setdefault(prim, {})[platform] = picked.item
    return chosen


def backend_scores(recs: Sequence[BenchmarkRecord]) -> list[Scored[str]]:
    """Every backend of one group that can be ranked: its geometric-mean ratio to
    each config's fastest, with the typical uncertainty of its times (records'
    order)."""
    field = rank_field(recs)
    times = {id(r): rank_ms(r, field) for r in recs}
    labels = {r.label for r in recs}
    best: dict[str, float] = {}
    for r in recs:
        t = times[id(r)]
        if t is not None and t > 0:
            best[r.label] = min(best.get(r.label, math.inf), t)
    scored = []
    for backend in dict.fromkeys(r.backend for r in recs):
        mine = [r for r in recs if r.backend == backend]
        ok = all((times[id(r)] or 0) > 0 for r in mine) and all(
            r.matches_reference is not False for r in mine
        )
        if not ok or {r.label for r in mine} != labels:
            continue
        # every time is > 0 here (checked above): `or 0` only tells the checker
        logs = [math.log((times[id(r)] or 0) / best[r.label]) for r in mine]
        errors = [interval_error(r.relative_iqr, r.n) for r in mine]
        scored.append(
            Scored(backend, math.exp(sum(logs) / len(logs)), statistics.median(errors))
        )
    return scored
