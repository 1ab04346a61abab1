"""The one rule for "fastest" (``dispatch/ranking.py``), and that the benchmark's
saved defaults and the tuner both go through it."""

from __future__ import annotations

import math

from polykernel import BenchmarkRecord
from polykernel.benchmark.ranking import best_backends
from polykernel.dispatch.ranking import RESOLUTION, Scored, choose, interval_error, tied


def test_the_default_is_kept_unless_another_is_faster_beyond_the_spread():
    assert choose([Scored("d", 1.02), Scored("x", 1.0)], default="d").item == "d"
    assert choose([Scored("d", 1.10), Scored("x", 1.0)], default="d").item == "x"
    # a wider measured spread widens the tie: the default stays
    assert choose([Scored("d", 1.10, 0.12), Scored("x", 1.0)], default="d").item == "d"
    assert choose([Scored("d", 1.10), Scored("x", 1.0, 0.12)], default="d").item == "d"


def test_ties_go_to_the_fixed_order_not_to_whoever_measured_fastest():
    runs = [Scored("a", 1.01), Scored("b", 1.0), Scored("c", 1.5)]
    assert choose(runs).item == "a"
    assert choose(list(reversed(runs))).item == "b"  # the order is the caller's


def test_among_ties_the_candidate_that_holds_up_under_contention_wins():
    runs = [Scored("par", 1.0, 0.0, 5.0), Scored("ser", 1.02, 0.0, 1.1)]
    assert choose(runs).item == "ser"
    # ...but the default still comes first, and a clear winner stays the winner
    assert choose(runs, default="par").item == "par"
    clear = [Scored("par", 1.0, 0.0, 5.0), Scored("ser", 1.5, 0.0, 1.1)]
    assert choose(clear).item == "par"


def test_nothing_measured_is_no_winner_and_non_finite_ratios_never_win():
    assert choose([]) is None
    assert choose([Scored("nan", math.nan), Scored("ok", 1.2)]).item == "ok"


def test_the_tie_band_and_the_interval():
    assert tied(Scored("a", 1.0), Scored("b", 1.0 + RESOLUTION))
    assert not tied(Scored("a", 1.0), Scored("b", 1.0 + 2 * RESOLUTION))
    assert interval_error(0.2, 100) == 1.57 * 0.2 / 10
    assert interval_error(None, 10) == 0.0 and interval_error(0.2, 0) == 0.0


def _rec(backend: str, label: str, ms: float) -> BenchmarkRecord:
    return BenchmarkRecord("cpu", backend, label, median_ms=ms, p25_ms=ms,
                           p75_ms=ms, n=10, primitive="p")  # fmt: skip


def test_saved_defaults_rank_by_the_same_rule():
    records = [_rec("a", "s", 1.0), _rec("b", "s", 1.02),
               _rec("a", "l", 10.0), _rec("b", "l", 10.1)]  # fmt: skip
    assert best_backends(records) == {"p": {"cpu": "a"}}  # fixed order in a tie
    assert best_backends(records, {("p", "cpu"): "b"}) == {"p": {"cpu": "b"}}
    faster = [_rec("a", "s", 1.0), _rec("b", "s", 2.0)]
    assert best_backends(faster, {("p", "cpu"): "b"}) == {"p": {"cpu": "a"}}
