"""Paired comparison (issue 28): ratios taken round by round, so the machine's speed
steps between rounds cancel where raw medians would not; fast-end ratios (issue 37,
item 3), which also hold when only the reference changes speed."""

from __future__ import annotations

import math

import pytest

from polykernel.benchmark.paired import fast_end_ratio, fastest_paired, ratio_to

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


def _run(fast_share: float, rounds: int = 70) -> dict[str, list[float]]:
    """A compute-bound kernel (1 ms, +-2 %) beside a memory-bound reference whose
    speed has modes: 0.12 ms in ``fast_share`` of the rounds, else 0.20-0.30 ms, as
    ``jax_raw``'s ``2 * x + y`` on 10^6 floats on a 2-core VM (2026-11-29)."""
    import numpy as np

    rng = np.random.default_rng(int(fast_share * 100))
    fast = rng.random(rounds) < fast_share
    ref = np.where(fast, 0.12, rng.uniform(0.20, 0.30, rounds)) * rng.uniform(
        1, 1.05, rounds
    )
    kernel = 1.0 * rng.uniform(0.98, 1.02, rounds)
    return {"jax_raw": ref.tolist(), "warp": kernel.tolist()}


def test_a_reference_changing_speed_moves_round_ratios_not_fast_ends():
    # Two runs of identical code: the reference's fast mode in 30 % / 60 % of rounds.
    one, two = _run(0.30), _run(0.60)
    median_moved = (
        ratio_to(two, "warp", "jax_raw")[0] / ratio_to(one, "warp", "jax_raw")[0]
    )
    assert median_moved > 1.5  # the median of round ratios: 50 %+ apart
    (r1, s1), (r2, s2) = (fast_end_ratio(t, "warp", "jax_raw") for t in (one, two))
    assert r2 / r1 == pytest.approx(1.0, abs=0.05)
    assert r1 == pytest.approx(1.0 / 0.12, rel=0.08)  # the reference at its fast end
    assert s1 < 0.10 and s2 < 0.10  # and it says so: not noisy


def test_fast_ends_leave_out_calls_slowed_by_load():
    # "b" takes 2x "a"; load slowed a third of the rounds, of either, by up to 5x.
    a = [1.0, 1.0, 5.0, 1.0, 1.0, 3.0, 1.0, 1.0, 4.0] * 2
    b = [2.0, 9.0, 2.0, 2.0, 2.0, 2.0, 7.0, 2.0, 2.0] * 2
    assert fast_end_ratio({"a": a, "b": b}, "b", "a") == (pytest.approx(2.0), 0.0)


def test_the_fast_end_ratio_spread_is_its_halves_disagreement():
    # The first half of the rounds says 2.0, the second 2.5: spread 0.5 / the ratio.
    times = {"a": [1.0] * 8, "b": [2.0] * 4 + [2.5] * 4}
    ratio, spread = fast_end_ratio(times, "b", "a")
    assert ratio == pytest.approx(2.0)  # the fastest fifth (at least 3 calls) of b
    assert spread == pytest.approx(0.5 / 2.0)
    # Halves in time: alternating rounds sample both speeds in each half, no spread.
    assert fast_end_ratio({"a": [1.0] * 8, "b": [2.0, 2.5] * 4}, "b", "a")[1] == 0.0


def test_a_reference_in_one_state_then_another_shows_as_spread():
    # The reference runs 1.1 ms for the first 20 rounds, then 0.6 ms (a state that
    # lasts seconds, as jax_raw's transposed CSR product on a 2-core VM); the
    # kernel holds 0.2 ms. Even and odd rounds would agree; the halves do not.
    ref = [1.1] * 20 + [0.6] * 20
    ratio, spread = fast_end_ratio({"jax_raw": ref, "k": [0.2] * 40}, "k", "jax_raw")
    assert ratio == pytest.approx(0.2 / 0.6)  # the reference's fast end: 0.6 ms
    assert spread == pytest.approx((0.2 / 0.6 - 0.2 / 1.1) / (0.2 / 0.6))
    # Too few rounds for halves: no spread; nothing timed: no ratio.
    assert (
        fast_end_ratio({"a": [1.0] * 5, "b": [2.0, 3.0] * 2 + [2.0]}, "b", "a")[1]
        == 0.0
    )
    assert all(math.isnan(v) for v in fast_end_ratio({"a": [], "b": []}, "b", "a"))
    # Calls faster than the clock's tick (0 s): no ratio rather than a division by 0.
    zero = {"a": [0.0] * 8, "b": [1.0] * 8}
    assert all(math.isnan(v) for v in fast_end_ratio(zero, "b", "a"))
    # The first half's fastest calls below it, not the whole run's: no spread.
    a = [1.0, 0.0] * 3 + [1.0] * 14  # 3 zeros, all in the first half
    ratio, spread = fast_end_ratio({"a": a, "b": [2.0] * 20}, "b", "a")
    assert ratio == pytest.approx(2.0 / 0.25) and math.isnan(spread)
