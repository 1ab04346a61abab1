"""``BenchmarkResult``: the records of a benchmark run and what to do with them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from .record import BenchmarkRecord

__all__ = ["BenchmarkResult", "Mismatch"]


class Mismatch(NamedTuple):
    """A backend whose output disagreed with the reference on one config."""

    primitive: str
    platform: str
    label: str
    backend: str
    reference: str
    max_abs_diff: float | None


class BenchmarkResult:
    """All records of one run (one primitive, or several merged by the CLI).

    Example:
        >>> r = BenchmarkResult([BenchmarkRecord("cpu", "a", "n=1", median_ms=2.0),
        ...                      BenchmarkRecord("cpu", "b", "n=1", median_ms=1.0)])
        >>> r.fastest("n=1").backend
        'b'
    """

    def __init__(
        self, records: Iterable[BenchmarkRecord], primitive_name: str = ""
    ) -> None:
        self.records: list[BenchmarkRecord] = list(records)
        self.primitive_name = primitive_name
        for rec in self.records:
            if not rec.primitive:
                rec.primitive = primitive_name

    @classmethod
    def combine(cls, results: Iterable[BenchmarkResult]) -> BenchmarkResult:
        """Merge several results (e.g. of many primitives) into one."""
        results = list(results)
        names = {r.primitive_name for r in results}
        name = names.pop() if len(names) == 1 else ""
        return cls([rec for r in results for rec in r.records], primitive_name=name)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[BenchmarkRecord]:
        return iter(self.records)

    def __repr__(self) -> str:
        return (
            f"BenchmarkResult(primitive_name={self.primitive_name!r}, "
            f"records={len(self.records)}, failures={len(self.failures)}, "
            f"mismatches={len(self.mismatches)})"
        )

    def __str__(self) -> str:
        return self.table()

    # -- queries ---------------------------------------------------------------
    @property
    def mismatches(self) -> list[Mismatch]:
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
            for r in self.records
            if r.matches_reference is False
        ]

    @property
    def failures(self) -> list[BenchmarkRecord]:
        """Records of runs that raised (``success=False``)."""
        return [r for r in self.records if not r.success]

    @property
    def noisy(self) -> list[BenchmarkRecord]:
        """Successful records whose IQR exceeds 10 % of the median."""
        return [r for r in self.records if r.success and r.noisy]

    def fastest(self, label: str | None = None) -> BenchmarkRecord | None:
        """Return the successful record with the lowest median time.

        Args:
            label: Restrict to one config; ``None`` searches every record.
        """
        pool = [
            r
            for r in self.records
            if r.success and r.median_ms is not None and label in (None, r.label)
        ]
        return min(pool, key=lambda r: r.median_ms) if pool else None

    def fastest_per_config(self) -> dict[tuple[str, str], BenchmarkRecord]:
        """Return ``{(primitive, label): fastest record}`` for every config."""
        best: dict[tuple[str, str], BenchmarkRecord] = {}
        for r in self.records:
            if not r.success or r.median_ms is None:
                continue
            key = (r.primitive, r.label)
            if key not in best or r.median_ms < best[key].median_ms:
                best[key] = r
        return best

    def best_backends(self) -> dict[str, dict[str, str]]:
        """Pick one default backend per (primitive, platform).

        A candidate must have succeeded on every config and never disagreed with
        the reference; among those the one with the lowest geometric-mean slowdown
        relative to the per-config best wins.
        """
        groups: dict[tuple[str, str], list[BenchmarkRecord]] = {}
        for r in self.records:
            groups.setdefault((r.primitive, r.platform), []).append(r)
        chosen: dict[str, dict[str, str]] = {}
        for (prim, platform), recs in groups.items():
            backend = _pick_backend(recs)
            if backend is not None and prim:
                chosen.setdefault(prim, {})[platform] = backend
        return chosen

    # -- outputs ---------------------------------------------------------------
    def table(self, baseline: str | None = None, highlight_best: bool = True) -> str:
        """Render the configs × backends comparison table (see :mod:`.table`)."""
        from .table import format_table

        return format_table(self, baseline=baseline, highlight_best=highlight_best)

    def print(self, baseline: str | None = None, highlight_best: bool = True) -> None:
        """Print :meth:`table` to stdout."""
        print(self.table(baseline=baseline, highlight_best=highlight_best))

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (``records`` as a list of dicts)."""
        from .io import result_to_dict

        return result_to_dict(self)

    def save(self, path: str | Path, format: str | None = None) -> Path:
        """Write the result as JSON or CSV (from the suffix unless ``format``)."""
        from .io import save_result

        return save_result(self, path, format=format)

    @classmethod
    def load(cls, path: str | Path, format: str | None = None) -> BenchmarkResult:
        """Read a result written by :meth:`save`."""
        from .io import load_result

        return load_result(path, format=format)

    def plot(self, path: str | Path, y: str = "median_ms") -> Path:
        """Write a bar chart (one group per config, one bar per backend) as PNG."""
        from .plot import plot_result

        return plot_result(self, path, y=y)

    def save_defaults(self) -> dict[str, dict[str, str]]:
        """Persist :meth:`best_backends` as tuned defaults and return it."""
        from ..tuned_defaults import save_defaults

        chosen = self.best_backends()
        if chosen:
            save_defaults(chosen)
        return chosen


def _pick_backend(recs: list[BenchmarkRecord]) -> str | None:
    labels = {r.label for r in recs}
    best = {}
    for r in recs:
        if r.success and r.median_ms:
            best[r.label] = min(best.get(r.label, math.inf), r.median_ms)
    scores: dict[str, float] = {}
    for backend in dict.fromkeys(r.backend for r in recs):
        mine = [r for r in recs if r.backend == backend]
        ok = all(r.success and r.median_ms for r in mine) and all(
            r.matches_reference is not False for r in mine
        )
        if not ok or {r.label for r in mine} != labels:
            continue
        logs = [math.log(r.median_ms / best[r.label]) for r in mine]
        scores[backend] = sum(logs) / len(logs)
    return min(scores, key=scores.__getitem__) if scores else None
