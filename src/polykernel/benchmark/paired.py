"""Paired comparison of interleaved timings: ratios taken round by round.

:func:`~polykernel.benchmark.sampling.sample_interleaved` times one interval of every
backend per round, so the intervals of one round ran within milliseconds of each
other, under the same machine state. A shared machine's speed moves in steps that
last longer than a round but shorter than a case — a virtual CPU here runs the same
loop 1.6x slower for a few hundred milliseconds, then fast again — and the median
of a backend's raw times lands on whichever side of such a step most of its
intervals fell: two backends that tie can come out 1.6x apart. A ratio taken
*within* each round cancels the step, and the median of those ratios is the
comparison a reader wants ("B takes 1.04x A's time"), with its own spread.

Both functions take the per-round times of :class:`~.sampling.Sampled` (every list
the same length, index ``r`` from round ``r`` of the kept window).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .record import relative_iqr

__all__ = ["fastest_paired", "pair_records", "ratio_to"]


def fastest_paired(times: Mapping[str, Sequence[float]]) -> str | None:
    """The backend whose time, relative to its round's geometric mean over all
    backends, has the smallest median (``None`` when nothing was timed).

    Example:
        >>> from polykernel.benchmark.paired import fastest_paired
        >>> # round 2 ran while the machine was slow: raw medians call it a tie
        >>> fastest_paired({"a": [1.0, 1.0, 3.0, 3.0], "b": [1.1, 1.1, 3.3, 3.3]})
        'a'
    """
    rounds = _rounds(times)
    if rounds == 0:
        return None
    logs = {n: np.log(np.asarray(t[:rounds], dtype=float)) for n, t in times.items()}
    centre = np.mean(list(logs.values()), axis=0)
    scores = {n: float(np.median(v - centre)) for n, v in logs.items()}
    return min(scores, key=lambda n: (scores[n], n))


def ratio_to(
    times: Mapping[str, Sequence[float]], name: str, base: str
) -> tuple[float, float]:
    """``(median, spread)`` of ``name``'s time divided by ``base``'s, round by
    round; spread is the IQR of those ratios over their median.

    Example:
        >>> from polykernel.benchmark.paired import ratio_to
        >>> ratio_to({"a": [1.0, 2.0, 1.0], "b": [1.5, 3.0, 1.5]}, "b", "a")
        (1.5, 0.0)
    """
    rounds = min(len(times[name]), len(times[base]))
    if rounds == 0:
        return math.nan, math.nan
    ratios = np.asarray(times[name][:rounds], float) / np.asarray(
        times[base][:rounds], float
    )
    return float(np.median(ratios)), relative_iqr(ratios.tolist()) or 0.0


def _rounds(times: Mapping[str, Sequence[float]]) -> int:
    return min((len(t) for t in times.values()), default=0)


def pair_records(
    records: Iterable[Any], times: Mapping[str, Sequence[float]], base: str | None
) -> None:
    """Set ``paired_base``, ``paired_ratio`` and ``paired_spread`` of each timed
    record (a :class:`~.record.BenchmarkRecord` of one case) from the per-round
    ``times`` of its backend and of ``base``'s, timed in the same rounds.

    Example:
        >>> from polykernel import BenchmarkRecord
        >>> from polykernel.benchmark.paired import pair_records
        >>> rec = BenchmarkRecord("cpu", "b", "n=1")
        >>> pair_records([rec], {"a": [1.0, 2.0], "b": [0.5, 1.0]}, "a")
        >>> rec.paired_base, rec.paired_ratio, rec.paired_spread
        ('a', 0.5, 0.0)
    """
    if base is None or not times.get(base):
        return
    for rec in records:
        if rec.success and times.get(rec.backend):
            ratio, spread = ratio_to(times, rec.backend, base)
            rec.paired_base, rec.paired_ratio, rec.paired_spread = base, ratio, spread
