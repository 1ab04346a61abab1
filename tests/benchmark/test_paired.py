"""Paired comparison (issue 28): ratios taken round by round, so the machine's speed
steps between rounds cancel where raw medians would not."""

from __future__ import annotations

import math

import pytest

from polykernel.benchmark.paired import fastest_paired, ratio_to

# Two machine states, 1.6x apart. "b" always takes 1.04x "a"'s time in the same
# state; in round 4 the machine sped up between a's interval and b's.
SLOW, FAST = 1.6, 1.0
A = [10.0 * s for s in [SLOW] * 5 + [FAST] * 4]
B = [10.4 * s for s in [SLOW] * 4 + [FAST] * 5]


def test_raw_medians_mislead_where_round_ratios_do_not():
    import statistics

    # The raw medians land on opposite sides of the step: "b" looks 1.5x faster...
    assert statistics.median(B) < 0.7 * statistics.median(A)
    # ...while round by round it took 1.04x "a"'s time in all but one round.
    times = {"a": A, "b": B}
    assert fastest_paired(times) == "a"
    ratio, spread = ratio_to(times, "b", "a")
    assert ratio == pytest.approx(1.04) and spread == pytest.approx(0.0, abs=1e-12)


def test_the_fastest_is_judged_against_each_rounds_mean_of_all_candidates():
    steps = [1.0, 3.0, 1.0, 3.0, 2.0]
    times = {
        "serial": [1.00 * s for s in steps],
        "parallel": [0.90 * s for s in steps],
        "slow": [2.50 * s for s in steps],
    }
    assert fastest_paired(times) == "parallel"
    assert ratio_to(times, "serial", "parallel")[0] == pytest.approx(1 / 0.9)


def test_a_ratio_spread_is_the_iqr_of_the_round_ratios_over_their_median():
    times = {"a": [1.0, 1.0, 1.0, 1.0, 1.0], "b": [1.0, 1.1, 1.2, 1.3, 1.4]}
    ratio, spread = ratio_to(times, "b", "a")
    assert ratio == pytest.approx(1.2)
    assert spread == pytest.approx((1.3 - 1.1) / 1.2)


def test_nothing_timed_has_no_fastest_and_no_ratio():
    assert fastest_paired({}) is None
    assert fastest_paired({"a": []}) is None
    ratio, spread = ratio_to({"a": [], "b": []}, "a", "b")
    assert math.isnan(ratio) and math.isnan(spread)


def test_ties_are_broken_by_name_so_the_choice_repeats():
    times = {"b": [1.0, 2.0], "a": [1.0, 2.0]}
    assert fastest_paired(times) == "a"
