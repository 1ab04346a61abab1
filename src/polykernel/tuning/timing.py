"""How the tuner times the candidates of one case, and how it picks the fastest.

A tuned choice is used by every later call of that shape, in other processes, on
other days, so the tuner must measure what a loop calling *one* candidate sees, in a
way that repeats from one process to the next. Three measures serve that:

- **Each candidate as a loop sees it.** Every timed interval (:data:`INTERVAL_S`) is
  preceded by :data:`SETTLE_S` of the same candidate's calls, untimed: longer than a
  thread pool spins after its last parallel region (an OpenMP pool spins about 8 ms
  here after a Numba ``parallel=True`` kernel; XLA's pool, which
  ``pk::parallel_for`` uses, about 2 ms), so a candidate is never timed while the
  previous candidate's threads still hold the cores. The number of calls is sized
  per candidate from its own call time.
- **Ratios taken round by round** (:mod:`polykernel.benchmark.paired`): the machine's
  speed moves in steps that are long next to a round and short next to a case; a
  ratio within a round cancels them, where raw medians would not.
- **Passes spread over time.** A case is timed in several passes (``passes``), each
  after every other case had its turn, so the passes meet different states of the
  machine (a virtual core slowed by a neighbour for seconds, a thread placed on the
  busier core). A candidate's ratio is the geometric mean of its per-pass ratios to
  that pass's fastest, and the winner is the smallest: a candidate that is fastest
  in one state and far behind in another loses to one that is close to the best in
  all of them.

A first round of three intervals drops candidates slower than :data:`OUT_OF_RACE`
times the fastest from the pass (their threads would only disturb the others);
their ratio is taken from those three rounds, and they do not compete for the win
(:mod:`.results`): three rounds under load can leave an interval wide enough to tie
with the fastest (3.65x ±448 %: a kernel nine times slower won as the first
declared). The default is never dropped (``keep``): the rule replaces it only when
a candidate is faster beyond both their intervals, so it is timed as long as they.

Each ratio comes with the half-width of its interval (``error``): the notch of its
round-by-round ratios over all the passes' rounds, or half the range of its
per-pass ratios when the passes disagree more than that. The one rule that turns
ratios into a winner (:mod:`polykernel.dispatch.ranking`) compares by it.

A pass never starts an interval after its ``deadline``: the tuner's budget bounds
the timing too (a call in flight finishes).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np

from ..benchmark.paired import fastest_paired, ratio_to
from ..benchmark.record import relative_iqr
from ..benchmark.sampling import StopRule, sample_interleaved
from ..dispatch.ranking import interval_error

__all__ = [
    "INTERVAL_S",
    "OUT_OF_RACE",
    "SETTLE_S",
    "CandidateTimes",
    "PassTimes",
    "combine_passes",
    "time_pass",
]

#: Untimed calls of a candidate before each of its timed intervals, in seconds.
SETTLE_S = 12e-3
#: The timed part of an interval, in seconds (at least one call).
INTERVAL_S = 2e-3
#: A candidate slower than this many times the fastest after three rounds cannot
#: win and leaves the pass.
OUT_OF_RACE = 2.0
#: At most this many calls in one settling stretch or timed interval.
MAX_CALLS = 1000


@dataclasses.dataclass(frozen=True)
class CandidateTimes:
    """One candidate in one pass (or all passes combined): per-call seconds (median,
    IQR / median), the time relative to the fastest (round by round), that ratio's
    spread and the rounds behind it, the half-width of its interval, or the error
    that dropped it."""

    median_s: float = math.nan
    spread: float = math.nan
    ratio: float = math.nan
    ratio_spread: float = math.nan
    raced: bool = True
    error: BaseException | None = None
    rounds: int = 0
    ratio_error: float = math.nan


@dataclasses.dataclass(frozen=True)
class PassTimes:
    """One pass over one case: every candidate's times and why the rounds stopped."""

    candidates: dict[str, CandidateTimes]
    stopped_by: str


def _counts(one_call_s: Mapping[str, float], seconds: float) -> dict[str, int]:
    return {
        n: max(1, min(MAX_CALLS, int(seconds / max(t, 1e-7))))
        for n, t in one_call_s.items()
    }


def time_pass(
    calls: Mapping[str, Callable[[], Any]],
    *,
    n_warmup: int,
    rule: StopRule,
    block: Callable[[Any], Any],
    deadline: float | None = None,
    keep: Collection[str] = (),
) -> PassTimes:
    """Time ``calls`` (name -> zero-argument call) once: warm-up, three rounds of
    every candidate, then rounds of those still in the race under ``rule`` (and of
    ``keep``, however slow); no call starts after ``deadline`` (a
    ``time.perf_counter()`` time), and a candidate the deadline left untimed is not
    in the result."""
    one: dict[str, float] = {}
    errors: dict[str, BaseException] = {}
    for _ in range(max(1, n_warmup)):
        for name, fn in calls.items():
            if name in errors or _past(deadline):
                continue
            t0 = time.perf_counter()
            try:
                block(fn())
            except Exception as err:  # dropped like a failure in the rounds
                errors[name] = err
                continue
            one[name] = min(one.get(name, math.inf), time.perf_counter() - t0)
    live = {n: f for n, f in calls.items() if n not in errors}
    sample = functools.partial(
        sample_interleaved,
        clock=time.perf_counter,
        block=block,
        n_batch_per_run=_counts(one, INTERVAL_S),
        n_settle=_counts(one, SETTLE_S),
        deadline=deadline,
    )
    first = sample(live, StopRule(3))
    medians = {n: float(np.median(t)) for n, t in first.times_s.items() if t}
    best = min(medians.values(), default=0.0)
    racing = {
        n: live[n] for n, m in medians.items() if m <= OUT_OF_RACE * best or n in keep
    }
    sampled = sample(racing, rule)
    errors.update(first.errors)
    errors.update(sampled.errors)
    winner = fastest_paired(sampled.times_s) or fastest_paired(first.times_s)
    found: dict[str, CandidateTimes] = {}
    for name in calls:
        if name in errors:
            found[name] = CandidateTimes(error=errors[name])
            continue
        raced = bool(sampled.times_s.get(name))
        pool = sampled.times_s if raced else first.times_s
        samples = pool.get(name, [])
        if not samples or winner is None or not pool.get(winner):
            continue  # the deadline came before its first interval: not timed
        ratio, ratio_spread = ratio_to(pool, name, winner)
        found[name] = CandidateTimes(
            float(np.median(samples)),
            relative_iqr(samples) or 0.0,
            ratio,
            ratio_spread,
            raced,
            rounds=len(samples),
        )
    # nothing raced (the deadline came first): the first rounds say why it stopped
    return PassTimes(found, sampled.stopped_by if racing else first.stopped_by)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


def combine_passes(passes: Sequence[PassTimes]) -> dict[str, CandidateTimes]:
    """Every candidate over all ``passes``: its ratio is the geometric mean of its
    per-pass ratios, rescaled so the smallest is 1 (the winner); its spread is the
    larger of its typical spread within a pass and the range of its per-pass
    ratios; a candidate that failed in any pass keeps that error.

    Example:
        >>> from polykernel.tuning.timing import CandidateTimes, PassTimes
        >>> from polykernel.tuning.timing import combine_passes
        >>> fast_then_slow = PassTimes({"a": CandidateTimes(1.0, 0.0, 1.0, 0.0),
        ...                             "b": CandidateTimes(1.1, 0.0, 1.1, 0.0)}, "")
        >>> b_collapses = PassTimes({"a": CandidateTimes(1.0, 0.0, 1.0, 0.0),
        ...                          "b": CandidateTimes(1.6, 0.0, 1.6, 0.0)}, "")
        >>> {n: round(c.ratio, 3) for n, c in
        ...  combine_passes([fast_then_slow, b_collapses]).items()}
        {'a': 1.0, 'b': 1.327}
    """
    names = list(dict.fromkeys(n for p in passes for n in p.candidates))
    combined: dict[str, CandidateTimes] = {}
    for name in names:
        seen = [p.candidates[name] for p in passes if name in p.candidates]
        failed = next((c.error for c in seen if c.error is not None), None)
        if failed is not None:
            combined[name] = CandidateTimes(error=failed)
            continue
        ratios = np.array([c.ratio for c in seen])
        mean = float(np.exp(np.mean(np.log(ratios))))
        across = float((ratios.max() - ratios.min()) / mean) if len(seen) > 1 else 0.0
        within = float(np.median([c.ratio_spread for c in seen]))
        rounds = sum(c.rounds for c in seen)
        combined[name] = CandidateTimes(
            float(np.median([c.median_s for c in seen])),
            float(np.median([c.spread for c in seen])),
            mean,
            max(within, across),
            all(c.raced for c in seen),
            rounds=rounds,
            ratio_error=max(interval_error(within, rounds), across / 2),
        )
    best = min(
        (c.ratio for c in combined.values() if c.error is None), default=math.nan
    )
    return {
        n: dataclasses.replace(c, ratio=c.ratio / best) if c.error is None else c
        for n, c in combined.items()
    }
