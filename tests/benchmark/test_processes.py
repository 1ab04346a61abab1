"""Records of the same run timed in several processes, joined (issue 37, item 2):
``merge_processes`` and what the regression gate makes of them."""

from __future__ import annotations

import math

import pytest

from polykernel import BenchmarkRecord, BenchmarkResult
from polykernel.benchmark.processes import merge_processes
from polykernel.benchmark.regression import AUTO, compare_records


def _rec(backend="numba", ratio=1.0, ms=1.0, spread=0.02, **kw) -> BenchmarkRecord:
    fields = {"median_ms": ms, "p25_ms": 0.98 * ms, "p75_ms": 1.02 * ms,
              "min_ms": 0.95 * ms, "max_ms": 1.5 * ms, "mean_ms": ms, "std_ms": 0.0,
              "n": 10, "n_sampled": 20, "paired_ratio": ratio, "paired_spread": spread,
              "paired_base": "jax_raw", "primitive": "p"} | kw  # fmt: skip
    return BenchmarkRecord("cpu", backend, "n=8", **fields)


def _run(*records: BenchmarkRecord) -> BenchmarkResult:
    return BenchmarkResult(list(records), primitive_name="p")


def test_the_processes_disagreement_is_the_spread():
    (rec,) = merge_processes([_run(_rec(ratio=0.73, ms=0.9)), _run(_rec(ms=1.1))])
    assert rec.paired_ratio == pytest.approx(0.865)
    assert rec.paired_spread == pytest.approx(0.27 / 0.865)
    assert (rec.median_ms, rec.p25_ms, rec.p75_ms) == pytest.approx((1.0, 0.882, 1.122))
    assert (rec.min_ms, rec.max_ms, rec.n, rec.n_sampled) == pytest.approx(
        (0.855, 1.65, 20, 40)
    )
    assert rec.std_ms == pytest.approx(0.1)  # the two means 0.9 and 1.1 apart
    assert rec.processes == 2 and rec.passes == 1
    assert rec.noise_note is not None and "in 2 processes" in rec.noise_note


def test_processes_that_agree_keep_their_own_spread():
    merged = merge_processes([_run(_rec(spread=0.04)), _run(_rec(ratio=1.01))])
    (rec,) = merged
    assert rec.paired_ratio == pytest.approx(1.005)
    assert rec.paired_spread == pytest.approx(0.04)


def test_a_backend_that_failed_in_any_process_failed():
    failed = BenchmarkRecord("cpu", "numba", "n=8", math.nan, math.nan, math.nan,
                             None, False, "boom", primitive="p")  # fmt: skip
    ref = _rec("jax_raw")
    merged = merge_processes([_run(_rec(), ref), _run(failed, ref)])
    assert [(r.backend, r.success) for r in merged] == [
        ("numba", False), ("jax_raw", True),
    ]  # fmt: skip
    assert merged.records[0].error == "boom"


def test_ratios_to_different_bases_are_not_joined_and_checks_are():
    one = _rec(matches_reference=True, max_abs_diff=0.0, throughput=10.0)
    two = _rec(paired_base="numba", matches_reference=False, max_abs_diff=0.5,
               throughput=5.0, ms=3.0)  # fmt: skip
    (rec,) = merge_processes([_run(one), _run(two)])
    assert (rec.paired_base, rec.paired_ratio, rec.paired_spread) == (None, None, None)
    assert rec.matches_reference is False and rec.max_abs_diff == 0.5
    assert rec.throughput == pytest.approx(10.0 / 2.0)  # the first's, at the median


def test_the_most_telling_stop_reason_and_the_first_results_kernels():
    first = _run(_rec(stopped_by="spread"))
    first.kernels[("p", "cpu")] = "kernels"  # any value: carried over as it is
    merged = merge_processes([first, _run(_rec(stopped_by="budget"))])
    assert merged.records[0].stopped_by == "budget"
    assert merged.kernels == {("p", "cpu"): "kernels"}
    assert len(merge_processes([])) == 0
    (alone,) = merge_processes([_run(_rec())])
    assert alone.processes == 1 and alone.paired_spread == 0.02


def _gate(ratio: float, ms: float = 1.0) -> BenchmarkResult:
    """One process's run: the kernel at ``ratio`` to its reference."""
    return _run(_rec(ratio=ratio, ms=ms), _rec("jax_raw", ms=ms / ratio))


def _judged(old: BenchmarkResult, new: BenchmarkResult):
    """The gate's comparison of the kernel (the reference is not judged)."""
    compared = compare_records(old.records, new.records, relative_to=AUTO)[0]
    (kernel,) = [c for c in compared if c.judged]
    assert kernel.base == "jax_raw"
    return kernel


def test_a_gate_on_a_baseline_from_one_fast_process_holds_and_still_fails_a_slowdown():
    # What the catalog's 10 us cases did on the 2-core VM: the baseline's process
    # read 0.73 (its own time too), every later process about 1.0: identical code.
    assert _judged(_gate(0.73, 0.8), _gate(1.0)).slower(1.10)  # it cried wolf
    base = merge_processes([_gate(0.73, 0.8), _gate(1.0)])
    new = merge_processes([_gate(1.0), _gate(1.02)])
    held = _judged(base, new)
    assert not held.slower(1.10) and held.ratio == pytest.approx(1.01 / 0.865)
    # A kernel slowed by 1.5x against a baseline whose processes agreed: fails.
    steady = merge_processes([_gate(1.0), _gate(1.02)])
    slowed = merge_processes([_gate(1.5, 1.5), _gate(1.52, 1.5)])
    assert _judged(steady, slowed).slower(1.10)
