"""How the tuner times one case (issue 28): settled intervals sized per candidate,
passes combined so a candidate fast in one machine state and slow in another loses
to one near the best in both."""

from __future__ import annotations

import math

import pytest

from polykernel.benchmark.sampling import StopRule
from polykernel.dispatch.ranking import Scored, choose
from polykernel.dispatch.records import (
    Choice,
    Entry as DispatchEntry,
    Key,
    Measurement,
    Scope,
)
from polykernel.tuning import timing
from polykernel.tuning.candidates import Candidate
from polykernel.tuning.options import TuneOptions
from polykernel.tuning.report import Measured, TunedCase
from polykernel.tuning.results import entry
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


def test_the_default_stays_in_the_race_so_a_burst_cannot_keep_it(monkeypatch, clock):
    """A default five times slower than a candidate, its three first rounds upset
    by load (the candidate's first interval slowed 10x, the default's third 20x):
    their round-by-round ratios read 0.5, 5 and 100. Dropped from the race, the
    default kept those three rounds and an interval of +-900 % that tied it with
    the candidate, so the rule kept it (a tuning run under CI load: 3.65x, +-448 %).
    Kept in the race (``keep``), it is timed in the same rounds as the candidate."""
    monkeypatch.setattr(timing, "SETTLE_S", 2e-3)
    monkeypatch.setattr(timing, "INTERVAL_S", 1e-3)
    # Calls are counted from the warm-up's: 100 us -> intervals of 20 settling
    # and 10 timed calls; 20 us -> 100 and 50.
    counts = {"default": 0, "fast": 0}

    def call(name, usual, slowed, first, last):
        def run():
            counts[name] += 1
            clock.now += slowed if first <= counts[name] <= last else usual
            return 0

        return run

    def timed(keep):
        counts.update(default=0, fast=0)
        calls = {"default": call("default", 100e-6, 2e-3, 62, 91),  # 3rd interval
                 "fast": call("fast", 20e-6, 200e-6, 2, 151)}  # 1st  # fmt: skip
        found = combine_passes([time_pass(calls, n_warmup=1, block=lambda x: x,
                                          rule=StopRule(8), keep=keep)])  # fmt: skip
        ranked = [Scored(n, c.ratio, c.ratio_error) for n, c in found.items()]
        return found, choose(ranked, default="default").item

    dropped, kept = timed(keep=())
    assert dropped["default"].raced is False and dropped["default"].rounds == 3
    assert dropped["default"].ratio_error > 4  # so wide it ties with 1.0
    assert kept == "default"
    raced, winner = timed(keep=["default"])
    assert raced["default"].raced is True
    assert raced["default"].rounds == raced["fast"].rounds == 8
    assert raced["default"].ratio == pytest.approx(5.0)
    assert raced["default"].ratio_error < 0.03
    assert winner == "fast"


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


def test_a_candidate_dropped_from_the_race_never_wins_the_case():
    b, a = Candidate("numba", (("v", "b"),)), Candidate("numba", (("v", "a"),))
    reference = Candidate("jax_raw", ())

    def case(*measured: Measured) -> TunedCase:
        found = TunedCase("n=4", Key("op", "cpu", "*", "*", "*", None), [[4]], "x")
        found.measured.extend(measured)
        return found

    def winner(found: TunedCase) -> Candidate:
        made = entry(found, reference, lambda backend: "id", {}, TuneOptions())
        assert made is not None
        return made.winner

    # Declared first, 3.65x the fastest with an interval of +-448 % from its three
    # rounds: tied by the rule, it would win; dropped from the race, it does not.
    dropped = Measured(b, "ok", 1.5e-4, 0.47, "out of the race (>2.0x)",
                       ratio=3.65, ratio_error=4.48, rounds=3, raced=False)  # fmt: skip
    fast = Measured(a, "ok", 1.6e-5, 0.1, ratio=1.0, ratio_error=0.0, rounds=10)
    assert winner(case(dropped, fast)) == a
    # Each dropped in some pass (fastest in one, slow in the other): all compete.
    other = Measured(a, "ok", 1.6e-5, 0.1, ratio=1.0, rounds=3, raced=False)
    assert winner(case(dropped, other)) == b


def test_a_backends_best_is_one_timed_through_the_race_and_the_table_keeps_it():
    # The failure seen under load: numba's best named the variant dropped from the
    # race (its ratio from three rounds) over one raced beside the winner.
    key = Key("op", "cpu", "*", "*", "*", None)
    b = Measurement(Choice.of("numba", {"v": "b"}), "ok", 1.5e-4, 0.4, ratio=1.1,
                    ratio_error=2.0, rounds=3, raced=False)  # fmt: skip
    a = Measurement(Choice.of("numba", {"v": "a"}), "ok", 2e-5, 0.1, ratio=1.3,
                    ratio_error=0.05, rounds=12)  # fmt: skip
    ref = Measurement(Choice.of("jax_raw"), "ok", 1.5e-5, 0.1, ratio=1.0, rounds=12)
    made = DispatchEntry(key, Scope.TUNED, ref.choice, ref.choice, None, (b, a, ref))
    assert made.best_of("numba") == a.choice
    # Only dropped ones measured: the best of them.
    only = DispatchEntry(key, Scope.TUNED, ref.choice, ref.choice, None, (b, ref))
    assert only.best_of("numba") == b.choice
    # Written and read back, the flag holds; a table written before it was kept
    # reads every candidate as raced; anything but true or false is refused.
    assert Measurement.from_json(b.to_json()) == b
    legacy = {k: v for k, v in b.to_json().items() if k != "raced"}
    assert Measurement.from_json(legacy).raced is True
    with pytest.raises(ValueError, match="raced must be true or false, got 'no'"):
        Measurement.from_json({**b.to_json(), "raced": "no"})
