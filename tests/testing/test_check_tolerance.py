"""Tolerances, comparisons and vmap patterns used by check_kernel."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from check_kernel_support import TABLE_HEADER

from polykernel.benchmark.tolerance import compare, compare_outputs, fd_step
from polykernel.testing import Tolerance, tolerance_for
from polykernel.testing.batching import MAX_PATTERNS, batch_patterns
from polykernel.testing.report import CheckReport, CheckResult


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float64, "rtol=1e-10 atol=1e-10"),
        (np.float32, "rtol=1e-05 atol=1e-05"),
        (np.float16, "rtol=0.002 atol=0.002"),
        (ml_dtypes.bfloat16, "rtol=0.02 atol=0.02"),
        (np.complex64, "rtol=1e-05 atol=1e-05"),
        (np.int32, "exact"),
        (np.bool_, "exact"),
    ],
)
def test_default_tolerance_per_dtype(dtype, expected):
    assert str(tolerance_for(dtype)) == expected


def test_user_tolerance_replaces_float_defaults_but_not_exact_ones():
    assert tolerance_for(np.float32, rtol=0.1) == Tolerance(0.1, 1e-5)
    assert tolerance_for(np.int8, rtol=0.1, atol=1.0) == Tolerance(0.0, 0.0)


def test_fd_step_is_the_cube_root_of_epsilon():
    assert fd_step(np.float32) == pytest.approx(np.finfo(np.float32).eps ** (1 / 3))
    assert fd_step(np.float64) == pytest.approx(6.06e-6, rel=1e-2)


def test_compare_scales_atol_with_the_output_magnitude():
    want = np.array([1000.0, 0.0], np.float32)
    # 5e-3 next to a 1000-sized entry is rounding noise for float32 sums.
    assert compare(want + np.float32([0.0, 5e-3]), want, tolerance_for(np.float32)).ok
    assert not compare(
        want + np.float32([0.0, 5e-2]), want, tolerance_for(np.float32)
    ).ok


def test_compare_reports_count_and_first_index():
    got = np.array([[1, 2], [3, 5]], np.int32)
    result = compare(got, np.array([[1, 2], [3, 4]], np.int32), tolerance_for(np.int32))
    assert not result.ok and result.max_abs == 1.0
    assert result.detail == "1 of 4 elements differ; first at (1, 1): 5 vs 4"


def test_compare_nans_must_match_and_infinities_compare_equal():
    tol = tolerance_for(np.float32)
    a = np.array([np.nan, np.inf, 1.0], np.float32)
    assert compare(a, a.copy(), tol).ok
    other = np.array([1.0, np.inf, 1.0], np.float32)
    result = compare(a, other, tol)
    assert not result.ok and result.max_abs == np.inf
    assert result.detail.startswith("1 of 3 elements differ; first at (0,)")


def test_compare_shape_and_output_count_mismatches():
    tol = tolerance_for(np.float32)
    assert compare(np.zeros(2), np.zeros(3), tol).detail == "shape (2,) != (3,)"
    mismatch = compare_outputs([np.zeros(2)], [np.zeros(2)] * 2, [tol])
    assert mismatch.detail == "1 outputs, expected 2"


def test_batch_patterns_cover_every_combination_and_the_last_axis():
    patterns, note = batch_patterns(2)
    assert patterns == [(0, 0), (0, None), (None, 0), ("last", "last")]
    assert note == ""
    assert batch_patterns(0) == ([], "the kernel has no inputs")


def test_batch_patterns_are_capped_with_a_recorded_reason():
    patterns, note = batch_patterns(7)
    assert len(patterns) == 1 + 7 + 1  # all batched, one at a time, last axis
    assert note == f"119 patterns not run (over {MAX_PATTERNS})"


def test_report_properties_and_empty_failure_table():
    rows = [
        CheckResult("determinism", "numba", "cpu", "pass", "", 0.0, 0.0, "bitwise"),
        CheckResult("transpose", "numba", "cpu", "skip", detail="no transpose rule"),
    ]
    report = CheckReport("demo", rows)
    assert report.ok and len(report) == 2 and report.skipped == rows[1:]
    assert report.table([]).split() == TABLE_HEADER
    assert (
        repr(report)
        == "<CheckReport check_kernel 'demo': 1 passed, 0 failed, 1 skipped>"
    )
