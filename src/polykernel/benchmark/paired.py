"""Paired comparison of interleaved timings: backends compared within one run.

:func:`~polykernel.benchmark.sampling.sample_interleaved` times one interval of every
backend per round, so the intervals of one round ran within milliseconds of each
other, under the same machine state. A shared machine's speed moves in steps that
last longer than a round but shorter than a case — a virtual CPU here runs the same
loop 1.6x slower for a few hundred milliseconds, then fast again — and the median
of a backend's raw times lands on whichever side of such a step most of its
intervals fell: two backends that tie can come out 1.6x apart.

:func:`ratio_to` (the tuner's margins) takes the ratio within each round and its
median. :func:`fast_end_ratio` (benchmark records, the demo, the regression gate)
compares the *fast ends* of the two backends instead: the mean of each one's
fastest fifth of its intervals over every round. The steps do not only slow a
machine as a whole: on this 2-core VM a memory-bound reference (``jax_raw``'s
``2 * x + y`` on 10^6 floats, 0.1-0.3 ms) changes speed by up to 2x from one second
to the next while a compute-bound kernel beside it (Warp's, 1 ms) holds its time,
so a ratio taken round by round moves with the reference: 5.1x and 6.1x in two
runs back to back. Load only ever adds time, and interleaving gives both backends
intervals in the fast states, so the fast ends of both are what a run measures
again: in 90 s of rounds cut into windows of 70, the fast-end ratio of each of four
kernels to that reference moved at most 9 % between adjacent windows (the median
of round ratios up to 69 %), and within 7 % across five fresh processes.

Its spread is the disagreement of the same estimate on the first and on the second
half of the rounds. Halves in time, not the even and the odd rounds: a reference
also changes speed in states that last seconds (``jax_raw``'s scatter for a
transposed CSR product on that VM: 1.1 ms for 15-45 rounds, then 0.6 ms), and even
and odd rounds both sample every state, so they agree while a run that saw one
state more than another reads a different ratio. Halves in time disagree then,
which is what :func:`~.sampling.sample_interleaved` waits out: with a paired
reference, a case's rounds go on until that spread is within the bound too.

Both functions take the per-round times of :class:`~.sampling.Sampled` (every list
the same length, index ``r`` from round ``r``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .record import relative_iqr

__all__ = ["FAST_END", "fast_end_ratio", "fastest_paired", "pair_records", "ratio_to"]

#: The share of a backend's intervals (its fastest; at least 3) a fast end averages.
FAST_END = 0.2


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


def fast_end_ratio(
    times: Mapping[str, Sequence[float]], name: str, base: str
) -> tuple[float, float]:
    """``(ratio, spread)``: ``name``'s fast end over ``base``'s, from the rounds
    both were timed in (see the module's docstring); spread is how far the same
    ratio on the first and on the second half of those rounds differ, over the
    ratio (0 for fewer than 6 rounds: no halves to compare).

    Example:
        >>> from polykernel.benchmark.paired import fast_end_ratio
        >>> # "a" slowed by load in rounds 2 and 3 (not "b"): the fast ends hold
        >>> fast_end_ratio({"a": [1.0, 1.0, 9.0, 9.0, 1.0, 1.0],
        ...                 "b": [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]}, "b", "a")
        (2.0, 0.0)
    """
    rounds = min(len(times[name]), len(times[base]))
    ours = np.asarray(times[name][:rounds], float)
    theirs = np.asarray(times[base][:rounds], float)
    ratio = _end_ratio(ours, theirs)
    if math.isnan(ratio):
        return ratio, math.nan
    if rounds < 6:
        return ratio, 0.0
    half = rounds // 2
    halves = (
        _end_ratio(ours[:half], theirs[:half]),
        _end_ratio(ours[half:], theirs[half:]),
    )
    return ratio, abs(halves[0] - halves[1]) / ratio  # nan: a half below the tick


def _end_ratio(ours: np.ndarray, theirs: np.ndarray) -> float:
    """``ours``' fast end over ``theirs``'; nan when nothing was timed or a fast
    end is below the clock's resolution (0 s)."""
    if len(ours) == 0:
        return math.nan
    mine, base = _fast_end(ours), _fast_end(theirs)
    return mine / base if mine > 0 and base > 0 else math.nan


def _fast_end(times: np.ndarray) -> float:
    """The mean of the fastest :data:`FAST_END` of ``times`` (at least 3 of them,
    or all there are)."""
    k = min(len(times), max(3, math.ceil(FAST_END * len(times))))
    return float(np.sort(times)[:k].mean())


def _rounds(times: Mapping[str, Sequence[float]]) -> int:
    return min((len(t) for t in times.values()), default=0)


def pair_records(
    records: Iterable[Any], times: Mapping[str, Sequence[float]], base: str | None
) -> None:
    """Set ``paired_base``, ``paired_ratio`` and ``paired_spread`` of each timed
    record (a :class:`~.record.BenchmarkRecord` of one case) from the per-round
    ``times`` of its backend and of ``base``'s, timed in the same rounds
    (:func:`fast_end_ratio`).

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
            ratio, spread = fast_end_ratio(times, rec.backend, base)
            rec.paired_base, rec.paired_ratio, rec.paired_spread = base, ratio, spread
