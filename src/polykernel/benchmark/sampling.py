"""Interleaved, adaptive timing of several backends on one case.

The backends of a case are timed in rounds: each round times one interval of every
backend, in an order that changes from round to round, so a burst of load from
another process (or a CPU frequency change) falls on all of them alike instead of on
whichever happened to run then. The orders are the rows of a balanced (Williams)
Latin square: over a cycle of rounds every backend runs first equally often and
runs right after every other backend equally often, so none always inherits the
same neighbour's aftermath (a parallel kernel's thread pool still spinning on the
cores, its data in the caches). The first ``n_runs`` rounds always run.

With a :class:`StopRule` ``target_spread``, the statistics come from a *window* of
the last ``n_runs`` rounds, and rounds go on until that window is steady: every
backend's spread in it — the interquartile range of its per-call times divided by
their median (IQR / median) — at most the bound. A burst of load from another
process therefore leaves the numbers once it has passed, instead of shifting every
median by however much of the run it covered. Rounds stop early when the case's
``time_budget_s`` (counted from the first round, and at least three times what the
first window took, so a slow case gets more than one window) is spent or
``max_runs`` rounds ran; the statistics are then those of the steadiest stretch of
half the rounds (more samples, so a steadier median from run to run, and a burst in
the other half left out), and a backend still above the bound there is *noisy*: its
record says so in words (``BenchmarkRecord.noise_note``).

With a ``paired_base`` (the reference each record's ``paired_ratio`` is taken
against), a window is steady only when, besides, every backend's fast-end ratio to
that base (over every round so far, :func:`~.paired.fast_end_ratio`) agrees with
itself between the first and the second half of the rounds within half the bound,
and at least two windows ran. Otherwise a reference that changes speed in states
lasting seconds (a 2-core VM's ``jax_raw``) leaves a run's ratio wherever the first
window's state put it, and a fast end of 15 rounds is the mean of 3 calls: on a
16-core machine two demo runs back to back put 6 of 11 ratios (of cases of 1 ms or
more) over 10 % apart, 2 with this rule. Time spent on it counts against the same
budget.

IQR / median is the statistic because it is what a reader compares two medians
with: it ignores the few very slow calls a scheduler causes, and unlike the
standard error it does not shrink merely because more samples were taken, so a bound
on it says the distribution itself is tight.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import BenchmarkTypeError, BenchmarkValueError
from .paired import fast_end_ratio
from .record import relative_iqr

__all__ = ["SLOW_CASE_WINDOWS", "Sampled", "StopRule", "sample_interleaved"]

#: A case whose first window alone outlasts its time budget may still take this many
#: windows' time to reach the bound.
SLOW_CASE_WINDOWS = 3


@dataclass(frozen=True)
class StopRule:
    """When the timing of one case stops.

    Attributes:
        n_runs: Timed intervals every backend gets at least (exactly, without a
            ``target_spread``), and the size of the window of consecutive rounds
            the statistics come from.
        target_spread: Bound on IQR / median (e.g. ``0.05``); ``None`` times a fixed
            ``n_runs`` intervals, as the reference does.
        time_budget_s: Seconds of timed rounds (from the first) a case may take
            while its window is above the bound; unless ``0`` (just ``n_runs``
            rounds), at least three times the first window's time.
        max_runs: At most this many rounds.

    Example:
        >>> from polykernel.benchmark.sampling import StopRule
        >>> StopRule(n_runs=10, target_spread=0.05).adaptive
        True
    """

    n_runs: int = 20
    target_spread: float | None = None
    time_budget_s: float = 2.0
    max_runs: int = 10_000

    def __post_init__(self) -> None:
        spread = self.target_spread
        if spread is not None and (
            isinstance(spread, bool)
            or not isinstance(spread, int | float)
            or not 0 < spread < 10
        ):
            raise BenchmarkValueError(
                f"benchmark: target_spread must be a number above 0 (a fraction of "
                f"the median, e.g. 0.05) or None for a fixed n_runs, got {spread!r}."
            )
        budget = self.time_budget_s
        if isinstance(budget, bool) or not isinstance(budget, int | float):
            raise BenchmarkTypeError(
                f"benchmark: time_budget_s must be a number of seconds, got {budget!r}."
            )
        if not budget >= 0:
            raise BenchmarkValueError(
                f"benchmark: time_budget_s must be >= 0 seconds, got {budget!r}."
            )
        runs = self.max_runs
        if isinstance(runs, bool) or not isinstance(runs, int) or runs < self.n_runs:
            raise BenchmarkValueError(
                f"benchmark: max_runs must be an integer >= n_runs ({self.n_runs}), "
                f"got {runs!r}."
            )

    @property
    def adaptive(self) -> bool:
        """Whether rounds may go on past ``n_runs``."""
        return self.target_spread is not None


@dataclass
class Sampled:
    """What :func:`sample_interleaved` measured: per-call seconds per backend (the
    kept window's), why it stopped (a key of ``record.STOP_REASONS``), how many
    rounds ran in all, the backends that raised and every complete round's times."""

    times_s: dict[str, list[float]]
    stopped_by: str
    errors: dict[str, BaseException]
    #: Every complete round's per-call seconds (``times_s`` is a window of them):
    #: what estimates that load cannot bias (a backend's fastest calls) read.
    every_round: dict[str, list[float]]
    rounds: int = 0


def _order(names: list[str], round_index: int) -> list[str]:
    """The order of round ``round_index``: a row of the Williams design for
    ``len(names)`` (rows ``0, 1, n-1, 2, n-2, ...`` shifted by the row number; for
    an odd count each row is followed by its reverse, as the design needs to
    balance)."""
    n = len(names)
    if n == 0:
        return []
    cycle = n if n % 2 == 0 else 2 * n
    k = round_index % cycle
    row = k if n % 2 == 0 else k // 2
    base = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    order = [names[(b + row) % n] for b in base]
    return order[::-1] if n % 2 and k % 2 else order


def _worst_spread(times: dict[str, list[float]], start: int, stop: int) -> float:
    """The largest spread (IQR / median) of any backend over rounds [start, stop)."""
    worst = 0.0
    for samples in times.values():
        spread = relative_iqr(samples[start:stop])
        if spread is None:
            return float("inf")
        worst = max(worst, spread)
    return worst


def _ratios_settled(
    times: dict[str, list[float]], base: str | None, rounds: int, window: int,
    bound: float,
) -> bool:  # fmt: skip
    """Whether every backend's ratio to ``base`` reads the same on both halves of
    the rounds so far (within half ``bound``); true without a live ``base``."""
    if base is None or base not in times or len(times) < 2:
        return True
    if rounds < 2 * window:
        return False
    for name in times:
        if name != base:
            spread = fast_end_ratio(times, name, base)[1]
            if not spread <= bound / 2:  # nan (a half below the tick): not settled
                return False
    return True


def sample_interleaved(
    calls: dict[str, Callable[[], Any]],
    rule: StopRule,
    *,
    n_batch_per_run: int | Mapping[str, int] = 1,
    clock: Callable[[], float],
    block: Callable[[Any], Any],
    catch_errors: bool = True,
    n_settle: int | Mapping[str, int] = 0,
    deadline: float | None = None,
    paired_base: str | None = None,
) -> Sampled:
    """Time ``calls`` (name -> zero-argument call) in rounds under ``rule``,
    each in its own order (see the module's docstring).

    Each interval issues ``n_batch_per_run`` calls back to back and blocks once; the
    recorded time is the interval divided by ``n_batch_per_run``. With ``n_settle``,
    each interval is preceded by that many untimed calls (blocked), so a backend is
    timed in the steady state a loop calling it sees — its threads awake, its data in
    cache — while the rounds still interleave the backends. The clock is read
    only around intervals and, for an adaptive rule, once per round for the budget.
    A call that raises drops its backend (in ``errors``), unless ``catch_errors`` is
    false. With a ``deadline`` (a time of ``clock``), no interval starts after it
    (nor its timed calls after their settling ones): the rounds stop there
    (``stopped_by`` ``"budget"``), keeping the complete ones. With ``paired_base``
    (one of ``calls``), an adaptive rule also waits for every ratio to it to settle
    (see the module's docstring).

    Example:
        >>> import itertools
        >>> from polykernel.benchmark.sampling import StopRule, sample_interleaved
        >>> ticks = itertools.count(0.0, 0.001)
        >>> s = sample_interleaved({"a": lambda: 1, "b": lambda: 2}, StopRule(3),
        ...                        clock=lambda: next(ticks), block=lambda x: x)
        >>> [len(t) for t in s.times_s.values()], s.stopped_by
        ([3, 3], 'runs')
    """
    live = list(calls)
    batch = _per_name(n_batch_per_run, live, missing=1)
    settle = _per_name(n_settle, live, missing=0)
    times: dict[str, list[float]] = {name: [] for name in live}
    errors: dict[str, BaseException] = {}
    start = clock() if rule.adaptive and live else 0.0
    budget = rule.time_budget_s
    rounds, stopped_by, window = 0, "runs", rule.n_runs
    while live:
        cut = _past(deadline, clock)
        for name in [] if cut else _order(live, rounds):
            try:
                taken = _interval(calls[name], settle[name], batch[name], clock,
                                  block, deadline)  # fmt: skip
            except Exception as err:
                if not catch_errors:
                    raise
                errors[name] = err
                live.remove(name)
                times.pop(name)
                continue
            if taken is None:  # the round stays incomplete: dropped below
                cut = True
                break
            times[name].append(taken)
        if cut:
            stopped_by = "budget"
            break
        rounds += 1
        if rounds < window:
            continue
        if not rule.adaptive:
            break
        assert rule.target_spread is not None
        if _worst_spread(times, rounds - window, rounds) <= rule.target_spread and (
            _ratios_settled(times, paired_base, rounds, window, rule.target_spread)
        ):
            stopped_by = "spread"
            break
        if rounds >= rule.max_runs:
            stopped_by = "max_runs"
            break
        elapsed = clock() - start
        if rounds == window and budget > 0:  # a slow case gets more windows
            budget = max(budget, SLOW_CASE_WINDOWS * elapsed)
        if elapsed >= budget:
            stopped_by = "budget"
            break
    complete = min((len(t) for t in times.values()), default=0)
    times = {name: samples[:complete] for name, samples in times.items()}
    if stopped_by == "budget" and complete < rounds:
        rounds = complete
    if not rule.adaptive:
        first, size = 0, min(window, complete)
    elif stopped_by == "spread":
        first, size = rounds - window, window
    else:
        first, size = _steadiest_stretch(times, rounds, window)
    kept = {name: samples[first : first + size] for name, samples in times.items()}
    return Sampled(kept, stopped_by, errors, times, rounds)


def _past(deadline: float | None, clock: Callable[[], float]) -> bool:
    return deadline is not None and clock() >= deadline


def _interval(
    fn: Callable[[], Any],
    n_settle: int,
    n_batch: int,
    clock: Callable[[], float],
    block: Callable[[Any], Any],
    deadline: float | None,
) -> float | None:
    """One timed interval of ``fn`` (per-call seconds) after its settling calls;
    None when ``deadline`` passed before it could start (checked before the
    settling calls and again before the timed ones)."""
    if _past(deadline, clock):
        return None
    for _ in range(n_settle):
        block(fn())
    if n_settle and _past(deadline, clock):
        return None
    t0 = clock()
    outs = [fn() for _ in range(n_batch)]
    block(outs)
    return (clock() - t0) / n_batch


def _per_name(
    count: int | Mapping[str, int], names: list[str], *, missing: int
) -> dict[str, int]:
    """One count for every backend, or a count per backend (``missing`` for one the
    mapping leaves out)."""
    if isinstance(count, Mapping):
        return {n: int(count.get(n, missing)) for n in names}
    return dict.fromkeys(names, int(count))


def _steadiest_stretch(
    times: dict[str, list[float]], rounds: int, window: int
) -> tuple[int, int]:
    """``(first round, size)`` of the steadiest stretch of half the rounds (at least
    a window): more samples than one window make its median steadier from run to
    run, and a burst of load in the other half stays out."""
    size = max(window, rounds // 2)
    stride = max(window, size // 4)
    starts = sorted({*range(0, rounds - size + 1, stride), rounds - size})
    spreads = [(_worst_spread(times, i, i + size), i) for i in starts if i >= 0]
    return (min(spreads)[1] if spreads else 0), size


def check_rule(
    n_runs: int, target_spread: Any, time_budget_s: Any, max_runs: Any
) -> StopRule:
    """The :class:`StopRule` of ``run_benchmark``'s arguments (checked)."""
    if max_runs is None:
        max_runs = max(10_000, n_runs)
    return StopRule(n_runs, target_spread, time_budget_s, max_runs)
