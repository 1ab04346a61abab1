"""The one rule for "fastest": which measured candidate a table records as the winner.

Used wherever polykernel turns timings into a choice — a tuned case
(:mod:`polykernel.tuning`), a saved default (``polykernel benchmark
--save-defaults``), a bucket between two tuned ones (:mod:`.lookup`) — so a choice
means the same thing whichever command made it.

Each candidate comes with its time relative to the fastest (``ratio``, 1.0 for the
fastest) and the uncertainty of that ratio (``error``: the half-width of its
interval, relative). Two candidates whose ratios differ by less than the larger
of their errors, or by less than :data:`RESOLUTION`, are *tied*: a timing on a
shared machine cannot order them, and a rule that picked the one measured first
would change its pick from one run to the next. Among the candidates tied with the
fastest, the winner is, in this order:

1. the **default** (the backend's untuned choice), so a tuned pick replaces the
   default only where it is faster beyond the measured spread — tuning never makes
   a call slower than not tuning;
2. else the **first in a fixed order** (the order candidates are declared), never
   whichever happened to measure fastest — among those that **hold up under
   contention**, when that was measured: a candidate whose time with the machine's
   other cores busy is more than :data:`COLLAPSE` times the best one's there is
   passed over (a parallel loop that idles on a loaded machine).

Contention is a filter, not a ranking: one pass on a machine loaded on purpose is
noisier than the idle passes. Measured here (``benchmarks/bench_tuning.py``, two
independent tuning runs of 12 shapes each for two primitives): breaking ties by
the smallest ratio under load changed the pick between the runs on 33–42% of the
shapes, the filter on 17–25%.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

__all__ = [
    "COLLAPSE",
    "NOTCH",
    "RESOLUTION",
    "Scored",
    "choose",
    "in_the_race",
    "interval_error",
    "tied",
]

#: Differences below this (relative) are never acted on, whatever the intervals
#: say. A wider band trades accuracy for stability: on this project's 2-vCPU
#: machine one candidate's ratio moves by 5-14% between processes (more than its
#: interval within one); a 15% band gave identical picks in two tuning runs but
#: picks within 5% of the fastest on 67% of the shapes, where 3% gave 92%.
RESOLUTION = 0.03
#: A tied candidate slower than this many times the best with the other cores busy
#: collapses under contention and is passed over.
COLLAPSE = 2.0
#: The half-width of a median's ~95% interval is NOTCH * IQR / sqrt(n) (the notch
#: of McGill, Tukey and Larsen's box plots).
NOTCH = 1.57

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Scored(Generic[T]):
    """One candidate to rank: what it is (any object), its ratio to the fastest,
    that ratio's relative uncertainty, and its ratio under contention (if
    measured)."""

    item: T
    ratio: float
    error: float = 0.0
    loaded_ratio: float | None = None


class _Timed(Protocol):
    @property
    def raced(self) -> bool: ...


R = TypeVar("R", bound=_Timed)


def in_the_race(measured: Sequence[R]) -> list[R]:
    """The candidates of ``measured`` that may win: those timed through the race
    (``raced``), or all of them where none was. One dropped from a pass's race was
    more than twice the fastest's time in its first rounds, and the interval of
    those few rounds can be wide enough under load to tie it with the fastest (a
    kernel nine times slower read 3.65x ±448 % and won as the first declared)."""
    return [m for m in measured if m.raced] or list(measured)


def interval_error(spread: float | None, n: int) -> float:
    """The relative half-width of a median's interval from its spread (IQR /
    median) over ``n`` samples (0 when either is unknown).

    Example:
        >>> from polykernel.dispatch.ranking import interval_error
        >>> round(interval_error(0.2, 100), 4)
        0.0314
    """
    if spread is None or not math.isfinite(spread) or n < 1:
        return 0.0
    return NOTCH * spread / math.sqrt(n)


def tied(a: Scored, b: Scored, resolution: float = RESOLUTION) -> bool:
    """Whether the ratios of ``a`` and ``b`` differ by less than the measurements
    resolve."""
    margin = max(resolution, a.error, b.error)
    low, high = sorted((a.ratio, b.ratio))
    return high <= low * (1.0 + margin)


def choose(
    scored: Sequence[Scored[T]],
    default: T | None = None,
    *,
    resolution: float = RESOLUTION,
    collapse: float = COLLAPSE,
) -> Scored[T] | None:
    """The winner of ``scored`` (in their fixed order) by the module's rule; None
    when nothing was measured.

    Example:
        >>> from polykernel.dispatch.ranking import Scored, choose
        >>> runs = [Scored("default", 1.02, 0.01), Scored("fast", 1.0, 0.01)]
        >>> choose(runs, default="default").item      # within 3%: kept
        'default'
        >>> runs = [Scored("default", 1.30, 0.01), Scored("fast", 1.0, 0.01)]
        >>> choose(runs, default="default").item      # faster beyond the spread
        'fast'
    """
    usable = [s for s in scored if math.isfinite(s.ratio)]
    if not usable:
        return None
    fastest = min(usable, key=lambda s: s.ratio)
    near = [s for s in usable if tied(s, fastest, resolution)]
    for s in near:
        if default is not None and s.item == default:
            return s
    loaded = [s.loaded_ratio for s in near if s.loaded_ratio is not None]
    if loaded:
        limit = min(loaded) * collapse
        holding = [s for s in near if s.loaded_ratio is None or s.loaded_ratio <= limit]
        near = holding or near
    return near[0]
