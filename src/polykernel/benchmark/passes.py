"""A case timed in passes apart in time (``run_benchmarks(passes=...)``): the rule of
each pass, and the passes joined into one :class:`~.sampling.Sampled`.

Each pass gets its share of the case's runs, time budget and cap on rounds, so a
case timed in passes costs what it would in one stretch; its records come from every
pass: the per-call statistics from each pass's window, the ratios from every round.
"""

from __future__ import annotations

from collections.abc import Iterable

from .sampling import Sampled, StopRule

__all__ = ["merge_passes", "most_telling", "pass_rule"]


#: Why the timing of a case stopped, from the least to the most telling: the
#: reason of a case timed in passes is its passes' most telling one.
_STOP_ORDER = ("runs", "spread", "budget", "max_runs")


def most_telling(reasons: Iterable[str | None]) -> str | None:
    """The most telling of several stop reasons (``max_runs`` over ``budget`` over
    ``spread`` over ``runs``; an unknown one counts least); ``None`` for none."""
    known = [r for r in reasons if r is not None]
    rank = {r: i for i, r in enumerate(_STOP_ORDER)}
    return max(known, key=lambda r: rank.get(r, -1), default=None)


def pass_rule(rule: StopRule, passes: int, index: int) -> StopRule:
    """The rule of pass ``index`` (from 0) of ``passes``: ``rule``'s runs shared
    out (each pass a window of ``n_runs / passes`` rounds, rounded up when adaptive;
    without a bound the passes' rounds add up to exactly ``n_runs``), as its time
    budget and its cap on rounds.

    Example:
        >>> from polykernel.benchmark.passes import pass_rule
        >>> from polykernel.benchmark.sampling import StopRule
        >>> [pass_rule(StopRule(10), 3, i).n_runs for i in range(3)]
        [4, 3, 3]
        >>> pass_rule(StopRule(15, 0.1, 3.0), 3, 2)
        StopRule(n_runs=5, target_spread=0.1, time_budget_s=1.0, max_runs=3334)
    """
    if passes == 1:
        return rule
    if rule.adaptive:
        n_runs = -(-rule.n_runs // passes)
    else:
        n_runs = rule.n_runs // passes + (index < rule.n_runs % passes)
    return StopRule(
        n_runs,
        rule.target_spread,
        rule.time_budget_s / passes,
        max(n_runs, -(-rule.max_runs // passes)),
    )


def merge_passes(passes: list[Sampled]) -> Sampled:
    """One :class:`Sampled` of a case timed in ``passes`` (in time order): each
    backend's kept windows and its rounds one after the other, the rounds counted
    together, the most telling reason any pass stopped for. A backend that raised in
    any pass is left out (in ``errors``): every list keeps the same rounds.

    Example:
        >>> from polykernel.benchmark.passes import merge_passes
        >>> from polykernel.benchmark.sampling import Sampled
        >>> one = Sampled({"a": [1.0]}, "spread", {}, {"a": [2.0, 1.0]}, 2)
        >>> two = Sampled({"a": [3.0]}, "budget", {}, {"a": [3.0]}, 1)
        >>> m = merge_passes([one, two])
        >>> m.times_s, m.every_round, m.stopped_by, m.rounds
        ({'a': [1.0, 3.0]}, {'a': [2.0, 1.0, 3.0]}, 'budget', 3)
    """
    errors: dict[str, BaseException] = {}
    for sampled in passes:
        errors |= sampled.errors
    names = [n for n in passes[-1].times_s if n not in errors] if passes else []
    kept = {n: [t for s in passes for t in s.times_s[n]] for n in names}
    rounds = {n: [t for s in passes for t in s.every_round[n]] for n in names}
    stopped = most_telling(s.stopped_by for s in passes) or "runs"
    return Sampled(kept, stopped, errors, rounds, sum(s.rounds for s in passes))
