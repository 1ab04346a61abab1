"""How the tuner times one case (issue 28): settled intervals sized per candidate,
passes combined so a candidate fast in one machine state and slow in another loses
to one near the best in both."""

from __future__ import annotations

import math

import pytest

from polykernel.benchmark.sampling import StopRule
from polykernel.tuning import timing
from polykernel.tuning.timing import (
    CandidateTimes,
    PassTimes,
    combine_passes,
    time_pass,
)


def _pass(**ratios: float) -> PassTimes:
    return PassTimes(
        {n: CandidateTimes(r * 1e-5, 0.01, r, 0.02) for n, r in ratios.items()}, ""
    )


def test_a_candidate_that_collapses_in_one_pass_loses_to_a_steady_one():
    passes = [
        _pass(parallel=1.00, steady=1.03),  # the machine's quiet state
        _pass(parallel=1.80, steady=1.00),  # a neighbour slows one core
    ]
    combined = combine_passes(passes)
    assert combined["steady"].ratio == 1.0
    assert combined["parallel"].ratio == pytest.approx(math.sqrt(1.8 / 1.03))
    # its spread says how far its ratio moved between passes
    assert combined["parallel"].ratio_spread > 0.5


def test_one_pass_keeps_its_own_ratios_and_spreads():
    (name, found), *_ = combine_passes([_pass(a=1.0, b=1.2)]).items()
    assert name == "a" and found.ratio == 1.0 and found.ratio_spread == 0.02
    assert combine_passes([_pass(a=1.0, b=1.2)])["b"].ratio == pytest.approx(1.2)


def test_a_candidate_that_failed_in_any_pass_keeps_its_error():
    failed = PassTimes(
        {
            "a": CandidateTimes(1e-5, 0.0, 1.0, 0.0),
            "b": CandidateTimes(error=OSError()),
        },
        "",
    )
    combined = combine_passes([_pass(a=1.0, b=0.5), failed])
    assert isinstance(combined["b"].error, OSError)
    assert combined["a"].ratio == 1.0  # the failed one is no yardstick


class _VirtualClock:
    """A ``time`` module whose clock moves only when a call says it ran: timings
    of exactly known calls, whatever else the machine runs (the other pytest
    worker's processes preempt real busy loops for milliseconds)."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def call(self, seconds: float):
        """A call that takes exactly ``seconds`` on this clock."""

        def call():
            self.now += seconds
            return 0

        return call


@pytest.fixture
def clock(monkeypatch) -> _VirtualClock:
    found = _VirtualClock()
    monkeypatch.setattr(timing, "time", found)
    return found


def test_a_pass_settles_each_candidate_and_sizes_its_calls_by_its_own_time(
    monkeypatch, clock
):
    counts = {"quick": 0, "slow": 0, "hopeless": 0}
    durations = {"quick": 20e-6, "slow": 100e-6, "hopeless": 1e-3}

    def counted(name):
        def call():
            counts[name] += 1
            clock.now += durations[name]
            return 0

        return call

    monkeypatch.setattr(timing, "SETTLE_S", 2e-3)
    monkeypatch.setattr(timing, "INTERVAL_S", 1e-3)
    found = time_pass(
        {n: counted(n) for n in counts},
        n_warmup=1,
        rule=StopRule(4),
        block=lambda x: x,
    )
    assert found.candidates["quick"].ratio == 1.0
    assert found.candidates["slow"].ratio == pytest.approx(5.0)
    assert found.candidates["hopeless"].ratio == pytest.approx(50.0)
    assert found.candidates["slow"].raced is False  # > OUT_OF_RACE x the fastest
    assert found.candidates["hopeless"].raced is False
    # ~1 ms timed + ~2 ms settling per interval, whatever the candidate's speed:
    # the quick one makes far more calls than the slow ones
    assert counts["quick"] > 5 * counts["slow"] > 0
    assert found.stopped_by == "runs"


def test_a_candidate_that_raises_while_timed_is_recorded_not_raised(clock):
    calls = {"fine": clock.call(10e-6)}
    seen = {"n": 0}

    def flaky():
        seen["n"] += 1
        if seen["n"] > 2:  # passes the warm-up, fails in the rounds
            raise RuntimeError("seeded")
        clock.now += 10e-6
        return 0

    calls["flaky"] = flaky
    found = time_pass(calls, n_warmup=1, rule=StopRule(3), block=lambda x: x)
    assert isinstance(found.candidates["flaky"].error, RuntimeError)
    assert found.candidates["fine"].ratio == 1.0


def test_a_pass_starts_no_call_after_its_deadline(clock):
    calls = {"quick": clock.call(1e-4), "slow": clock.call(0.2)}
    t0 = clock.now
    found = time_pass(
        calls,
        n_warmup=2,
        rule=StopRule(10, 0.01, 30.0),
        block=lambda x: x,
        deadline=t0 + 0.3,
    )
    # a call in flight finishes: at most one slow call (plus settling) past it
    assert clock.now - t0 < 0.3 + 2 * 0.2 + 0.2
    assert found.stopped_by == "budget"
    assert set(found.candidates) <= {"quick", "slow"}
    gone = time_pass(
        calls, n_warmup=1, rule=StopRule(3), block=lambda x: x, deadline=t0
    )
    assert gone.candidates == {}  # nothing timed: not in the result
