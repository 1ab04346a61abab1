"""One result from the same benchmark timed in several processes.

A process keeps states of its own for as long as it lives: on the 2-core VM, six
fresh processes timing the catalog's 10 µs cases read Numba's ratio to ``jax_raw``
between 0.61 and 1.05 (in two of them every pure-XLA call ran 1.6x slower), while
the same rounds within one process agree to a few per cent, and cases of a
millisecond or more agree across processes within 6 %. A run in one process
cannot see that spread: a results file written by such a process, taken as a
regression gate's baseline, then fails identical code by 1.37x.
:func:`merge_processes` joins the results of several processes into records whose
spreads cover the processes' disagreement (``polykernel benchmark --processes``).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

from .machine import merge_environments
from .passes import most_telling
from .record import BenchmarkRecord
from .result import BenchmarkResult

__all__ = ["merge_processes"]


def merge_processes(results: Sequence[BenchmarkResult]) -> BenchmarkResult:
    """The records of ``results`` (the same benchmark timed in each of several
    processes; the first one's order and kernels) joined one per case and
    backend: a backend that failed in any process failed; otherwise the median of
    the processes' medians and ratios, the spread from the lowest lower quartile to
    the highest upper one, and a ratio's spread at least how far the processes'
    ratios lie apart (``record.processes`` counts them).

    Example:
        >>> from polykernel import BenchmarkRecord, BenchmarkResult
        >>> from polykernel.benchmark.processes import merge_processes
        >>> def run(ratio, ms):
        ...     rec = BenchmarkRecord("cpu", "numba", "n=8", median_ms=ms, p25_ms=ms,
        ...                           p75_ms=ms, n=10, paired_ratio=ratio,
        ...                           paired_spread=0.02, paired_base="jax_raw")
        ...     return BenchmarkResult([rec])
        >>> (rec,) = merge_processes([run(0.9, 1.0), run(1.1, 1.2)])
        >>> rec.paired_ratio, round(rec.paired_spread, 3), rec.median_ms, rec.n
        (1.0, 0.2, 1.1, 20)
        >>> round(rec.relative_iqr, 3), rec.processes
        (0.182, 2)
    """
    if not results:
        return BenchmarkResult([])
    groups: dict[tuple[str, str, str, str], list[BenchmarkRecord]] = {}
    for result in results:
        for rec in result.records:
            key = (rec.primitive, rec.platform, rec.label, rec.backend)
            groups.setdefault(key, []).append(rec)
    first = results[0]
    env = merge_environments(r.environment for r in results)
    merged = BenchmarkResult(
        [_merged(recs) for recs in groups.values()], first.primitive_name, env
    )
    merged.kernels.update(first.kernels)
    return merged


def _merged(records: list[BenchmarkRecord]) -> BenchmarkRecord:
    failed = next((r for r in records if not r.success), None)
    if len(records) == 1 or failed is not None:
        return dataclasses.replace(failed or records[0])
    medians = [r.median_ms for r in records]
    if any(m is None for m in medians):  # a record without times: as it was
        return dataclasses.replace(records[0])
    median = statistics.median(m for m in medians if m is not None)
    first = records[0]
    rec = dataclasses.replace(
        first,
        median_ms=median,
        mean_ms=_mean(r.mean_ms for r in records),
        std_ms=_pooled_std(records),
        min_ms=_extreme(min, (r.min_ms for r in records)),
        max_ms=_extreme(max, (r.max_ms for r in records)),
        p25_ms=_extreme(min, (r.p25_ms for r in records)),
        p75_ms=_extreme(max, (r.p75_ms for r in records)),
        n=sum(r.n for r in records),
        n_sampled=sum(r.n_sampled for r in records),
        stopped_by=most_telling(r.stopped_by for r in records),
        processes=sum(r.processes for r in records),
    )
    if first.throughput is not None and first.median_ms and median:
        rec.throughput = first.throughput * first.median_ms / median
    checked = [r.matches_reference for r in records if r.matches_reference is not None]
    rec.matches_reference = all(checked) if checked else None
    rec.max_abs_diff = _extreme(max, (r.max_abs_diff for r in records))
    _merge_ratios(rec, records)
    return rec


def _merge_ratios(rec: BenchmarkRecord, records: list[BenchmarkRecord]) -> None:
    """The median of the processes' ratios to the same base; its spread at least
    their range over it (none when a process has no ratio or another base)."""
    ratios = [r.paired_ratio for r in records]
    bases = {r.paired_base for r in records}
    if len(bases) != 1 or any(x is None or not x > 0 for x in ratios):
        rec.paired_base = rec.paired_ratio = rec.paired_spread = None
        return
    known = [x for x in ratios if x is not None]
    ratio = statistics.median(known)
    within = max((r.paired_spread or 0.0) for r in records)
    rec.paired_ratio = ratio
    rec.paired_spread = max(within, (max(known) - min(known)) / ratio)


def _mean(values) -> float | None:
    known = [v for v in values if v is not None and v == v]
    return statistics.fmean(known) if known else None


def _extreme(pick, values) -> float | None:
    known = [v for v in values if v is not None and v == v]
    return pick(known) if known else None


def _pooled_std(records: list[BenchmarkRecord]) -> float | None:
    """The standard deviation of all the processes' calls together (from each
    one's mean and standard deviation, equal weights)."""
    stats = [(r.mean_ms, r.std_ms) for r in records]
    if any(m is None or s is None for m, s in stats):
        return None
    means = [m for m, _ in stats if m is not None]
    within = statistics.fmean((s or 0.0) ** 2 for _, s in stats)
    return math.sqrt(within + statistics.pvariance(means))
