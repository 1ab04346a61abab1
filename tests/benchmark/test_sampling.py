"""Interleaved, adaptive timing (issues 28, 29): balanced orders, stopping rules,
noisy in words.

Every timing here runs on a scripted clock: each call advances it by the time the
test gives that backend's call, so spreads and budgets are exact.
"""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

import polykernel as pk
from polykernel.benchmark import BenchmarkRecord
from polykernel.benchmark.paired import fast_end_ratio
from polykernel.benchmark.sampling import StopRule, sample_interleaved


class Clock:
    """A clock that moves only when a scripted call runs."""

    def __init__(self) -> None:
        self.now = 0.0
        self.log: list[str] = []

    def __call__(self) -> float:
        return self.now

    def call(self, name: str, durations_ms):
        durations = iter(durations_ms)

        def run():
            self.log.append(name)
            self.now += next(durations) * 1e-3
            return name

        return run


def sample(clock, calls, rule, **kw):
    return sample_interleaved(calls, rule, clock=clock, block=lambda x: x, **kw)


def test_backends_are_interleaved_in_a_rotating_order():
    clock = Clock()
    calls = {n: clock.call(n, itertools.repeat(1.0)) for n in ("a", "b", "c")}
    s = sample(clock, calls, StopRule(n_runs=3))
    # One interval of every backend per round, each round in another order.
    assert clock.log == ["a", "b", "c", "c", "b", "a", "b", "c", "a"]
    assert s.stopped_by == "runs" and s.errors == {}
    assert s.times_s == {n: [pytest.approx(1e-3)] * 3 for n in "abc"}


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8])
def test_over_a_cycle_every_backend_follows_every_other_equally_often(n):
    """The orders are a balanced Latin square: no backend always runs right after
    the same one (and inherits its threads still spinning), none is always first."""
    names = [chr(ord("a") + i) for i in range(n)]
    clock = Clock()
    calls = {name: clock.call(name, itertools.repeat(1.0)) for name in names}
    cycle = n if n % 2 == 0 else 2 * n
    sample(clock, calls, StopRule(n_runs=cycle))
    rounds = [clock.log[i : i + n] for i in range(0, len(clock.log), n)]
    assert all(sorted(r) == names for r in rounds)
    firsts = Counter(r[0] for r in rounds)
    follows = Counter((r[i], r[i + 1]) for r in rounds for i in range(n - 1))
    assert set(firsts.values()) == {cycle // n}
    assert len(follows) == n * (n - 1) and len(set(follows.values())) == 1


def test_batch_and_settling_calls_may_be_given_per_backend():
    clock = Clock()
    calls = {n: clock.call(n, itertools.repeat(1.0)) for n in ("a", "b")}
    s = sample(
        clock, calls, StopRule(n_runs=2), n_batch_per_run={"a": 3}, n_settle={"b": 2}
    )
    # a: 3 timed calls, no settling; b: 2 settling calls, 1 timed (the defaults)
    assert Counter(clock.log) == {"a": 2 * 3, "b": 2 * (2 + 1)}
    assert s.times_s == {n: [pytest.approx(1e-3)] * 2 for n in "ab"}


def test_a_fixed_count_ignores_the_spread():
    clock = Clock()
    calls = {"noisy": clock.call("noisy", itertools.cycle([1.0, 3.0]))}
    s = sample(clock, calls, StopRule(n_runs=4))
    assert len(s.times_s["noisy"]) == 4 and s.stopped_by == "runs"


def test_a_tight_case_stops_after_the_minimum_runs():
    clock = Clock()
    calls = {
        "a": clock.call("a", itertools.repeat(1.0)),
        "b": clock.call("b", itertools.cycle([2.0, 2.02])),
    }
    s = sample(clock, calls, StopRule(n_runs=5, target_spread=0.05))
    assert s.stopped_by == "spread"
    assert [len(t) for t in s.times_s.values()] == [5, 5]


def test_a_noisy_backend_keeps_every_backend_running_until_the_budget():
    clock = Clock()
    calls = {
        "quiet": clock.call("quiet", itertools.repeat(1.0)),
        "noisy": clock.call("noisy", itertools.cycle([1.0, 3.0])),
    }
    rule = StopRule(n_runs=5, target_spread=0.05, time_budget_s=0.1)
    s = sample(clock, calls, rule)
    assert s.stopped_by == "budget" and s.rounds > 5
    # Interleaved: both got every round; the statistics use the steadiest half.
    assert clock.log.count("quiet") == clock.log.count("noisy") == s.rounds
    assert [len(t) for t in s.times_s.values()] == [s.rounds // 2] * 2
    assert 0.1 <= clock.now < 0.1 + 2 * 4e-3  # stopped in the round it ran out


def test_a_transient_disturbance_is_outlasted():
    clock = Clock()
    # Eight slow-and-jittery calls (another process was busy), then steady ones:
    # more runs bring the quartiles back within the bound.
    burst = [5.0, 1.0, 4.0, 1.0, 6.0, 1.0, 3.0, 1.0]
    calls = {"a": clock.call("a", itertools.chain(burst, itertools.repeat(1.0)))}
    s = sample(clock, calls, StopRule(n_runs=8, target_spread=0.05, time_budget_s=10))
    # The first steady window of eight rounds ends the case, and is what is kept:
    # the burst leaves the numbers instead of shifting the median.
    assert s.stopped_by == "spread" and 8 < s.rounds <= 16
    kept = sorted(s.times_s["a"])
    assert len(kept) == 8 and kept[:6] == [pytest.approx(1e-3)] * 6


def test_the_steadiest_half_is_kept_when_the_budget_ends():
    clock = Clock()
    # A burst far above the bound, then steady calls just above it (5.8 %) until
    # the budget ends: the statistics are those of the steadiest half of the
    # rounds, which leaves the burst out.
    burst, near = [1.0, 3.0] * 8, itertools.cycle([1.0, 1.06])
    calls = {"a": clock.call("a", itertools.chain(burst, near))}
    s = sample(clock, calls, StopRule(n_runs=4, target_spread=0.05, time_budget_s=0.2))
    assert s.stopped_by == "budget" and s.rounds > 100
    kept = s.times_s["a"]
    assert len(kept) == s.rounds // 2 and max(kept) == pytest.approx(1.06e-3)
    # Every complete round stays available (the fast-end ratios read all of them).
    assert s.every_round is not None and len(s.every_round["a"]) == s.rounds
    assert s.every_round["a"][:2] == [pytest.approx(1e-3), pytest.approx(3e-3)]


def test_a_slow_case_gets_more_than_one_window():
    clock = Clock()
    calls = {"slow": clock.call("slow", itertools.cycle([100.0, 300.0]))}
    # The first window (4 rounds) takes 0.8 s, more than the 0.1 s budget: the
    # case still runs three windows' time before giving up.
    s = sample(clock, calls, StopRule(n_runs=4, target_spread=0.05, time_budget_s=0.1))
    assert s.stopped_by == "budget" and s.rounds in (12, 13)  # 3 x 0.8 s, rounded
    assert len(s.times_s["slow"]) == s.rounds // 2  # the steadiest half


def test_the_cap_on_runs_ends_a_case():
    clock = Clock()
    calls = {"noisy": clock.call("noisy", itertools.cycle([1.0, 3.0]))}
    rule = StopRule(n_runs=5, target_spread=0.05, time_budget_s=1e9, max_runs=40)
    s = sample(clock, calls, rule)
    assert s.stopped_by == "max_runs" and s.rounds == 40


def test_a_backend_that_raises_is_dropped_or_raised():
    clock = Clock()

    def broken():
        raise RuntimeError("boom")

    calls = {"ok": clock.call("ok", itertools.repeat(1.0)), "bad": broken}
    s = sample(clock, calls, StopRule(n_runs=3))
    assert list(s.times_s) == ["ok"] and len(s.times_s["ok"]) == 3
    assert str(s.errors["bad"]) == "boom"
    with pytest.raises(RuntimeError, match="boom"):
        sample(clock, calls, StopRule(n_runs=3), catch_errors=False)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"target_spread": 0}, ValueError, r"target_spread must be a number above 0"),
        ({"target_spread": "5%"}, ValueError, r"target_spread .* got '5%'"),
        ({"time_budget_s": -1}, ValueError, r"time_budget_s must be >= 0 seconds"),
        ({"time_budget_s": "1s"}, TypeError, r"time_budget_s must be a number"),
        ({"max_runs": 3}, ValueError, r"max_runs must be an integer >= n_runs \(5\)"),
    ],
)
def test_bad_rules_are_our_errors(kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        StopRule(n_runs=5, **kwargs)
    assert isinstance(info.value, pk.BenchmarkError)


def test_noisy_is_judged_against_the_records_own_bound_and_said_in_words():
    rec = BenchmarkRecord(
        "cpu",
        "numba",
        "n=10",
        median_ms=1.0,
        p25_ms=0.96,
        p75_ms=1.03,
        n=20,
        spread_bound=0.05,
        stopped_by="budget",
        n_sampled=400,
    )
    assert rec.noisy and rec.noise_bound == 0.05
    assert rec.noise_note == (
        "IQR 7% of the median (bound 5%) over the steadiest 20 of 400 runs; the case's "
        "time budget ran out"
    )
    # Without a bound of its own (the reference's fixed count): 10 %.
    loose = BenchmarkRecord("cpu", "numba", "n=10", median_ms=1.0, p25_ms=0.96,
                            p75_ms=1.03)  # fmt: skip
    assert not loose.noisy and loose.noise_note is None and loose.noise_bound == 0.1
    data = rec.to_dict()
    assert data["noisy"] is True and data["relative_iqr"] == pytest.approx(0.07)
    assert BenchmarkRecord.from_dict(data) == rec  # the derived keys are ignored


def test_a_zero_budget_times_exactly_n_runs_and_still_judges_the_spread():
    clock = Clock()
    calls = {"slow": clock.call("slow", itertools.cycle([100.0, 300.0]))}
    s = sample(clock, calls, StopRule(n_runs=4, target_spread=0.05, time_budget_s=0))
    assert s.stopped_by == "budget" and s.rounds == 4 and len(s.times_s["slow"]) == 4


def test_no_interval_starts_after_the_deadline_and_cut_rounds_are_dropped():
    clock = Clock()
    calls = {n: clock.call(n, itertools.repeat(1.0)) for n in ("a", "b")}
    # each interval takes 1 ms: the deadline falls inside round 3 (a, then b)
    s = sample(clock, calls, StopRule(n_runs=10), deadline=4.5e-3)
    assert clock.log == ["a", "b", "b", "a", "a"]  # round 3 cut after 'a'
    assert s.stopped_by == "budget" and s.rounds == 2
    assert s.times_s == {n: [pytest.approx(1e-3)] * 2 for n in "ab"}
    adaptive = sample(
        clock, calls, StopRule(n_runs=10, target_spread=0.05), deadline=clock.now
    )
    assert adaptive.stopped_by == "budget" and adaptive.times_s == {"a": [], "b": []}


def test_timed_calls_do_not_start_when_settling_ran_past_the_deadline():
    clock = Clock()
    calls = {"slow": clock.call("slow", itertools.repeat(1000.0))}
    # one settling call takes 1 s: past the deadline, the timed call never starts
    s = sample(clock, calls, StopRule(n_runs=3), n_settle=1, deadline=0.5)
    assert clock.log == ["slow"] and s.stopped_by == "budget"
    assert s.times_s == {"slow": []} and s.rounds == 0


def test_with_a_paired_base_a_tight_case_takes_two_windows():
    clock = Clock()
    calls = {
        "jax_raw": clock.call("jax_raw", itertools.repeat(1.0)),
        "k": clock.call("k", itertools.cycle([2.0, 2.02])),
    }
    s = sample(clock, calls, StopRule(n_runs=5, target_spread=0.05),
               paired_base="jax_raw")  # fmt: skip
    # Two windows: halves of at least one window each to compare the ratio on.
    assert s.stopped_by == "spread" and s.rounds == 10
    assert [len(t) for t in s.times_s.values()] == [5, 5]  # the statistics: a window


def test_rounds_go_on_until_the_ratio_to_the_paired_base_settles():
    # The reference runs 1.1 ms for 7 rounds, then 0.6 ms for good (a state that
    # lasts seconds); the kernel holds 0.2 ms. Every window is tight either way.
    # (A change after the first two windows no rule sees coming: a run that ends
    # first reads the first state, and says so by no spread at all.)
    def calls(clock):
        ref = itertools.chain([1.1] * 7, itertools.repeat(0.6))
        return {
            "jax_raw": clock.call("jax_raw", ref),
            "k": clock.call("k", itertools.repeat(0.2)),
        }

    rule = StopRule(n_runs=5, target_spread=0.05, time_budget_s=10)
    clock = Clock()
    alone = sample(clock, calls(clock), rule)
    assert alone.stopped_by == "spread" and alone.rounds == 5  # the slow state only
    clock = Clock()
    paired = sample(clock, calls(clock), rule, paired_base="jax_raw")
    # Until the first half of the rounds holds 3 rounds of the fast state (its
    # fastest fifth, at least 3: 10 rounds, round 20) the halves read different ratios.
    assert paired.stopped_by == "spread" and paired.rounds == 20
    ratio, spread = fast_end_ratio(paired.every_round, "k", "jax_raw")
    assert ratio == pytest.approx(0.2 / 0.6) and spread == pytest.approx(0.0, abs=1e-9)


def test_a_ratio_that_never_settles_ends_with_the_budget_and_a_failed_base_is_dropped():
    clock = Clock()
    # The reference alternates states of 8 rounds: halves of the rounds so far
    # disagree whenever they hold the states in different shares.
    states = itertools.cycle([1.1] * 8 + [0.6] * 8)
    calls = {
        "jax_raw": clock.call("jax_raw", states),
        "k": clock.call("k", itertools.repeat(0.2)),
    }
    rule = StopRule(n_runs=4, target_spread=0.05, time_budget_s=0.05)
    s = sample(clock, calls, rule, paired_base="jax_raw")
    assert s.rounds >= 8 and s.stopped_by in ("spread", "budget")
    # A base that raises leaves the case: the others stop on their own spread.
    clock = Clock()

    def broken():
        raise RuntimeError("no")

    calls = {"jax_raw": broken, "k": clock.call("k", itertools.repeat(0.2))}
    s = sample(clock, calls, StopRule(n_runs=4, target_spread=0.05),
               paired_base="jax_raw")  # fmt: skip
    assert s.stopped_by == "spread" and s.rounds == 4 and "jax_raw" in s.errors
