"""Benchmark records say what ran: launch parameters and why, and each backend's
time over the reference's in the same rounds (issue 37, item 3)."""

from __future__ import annotations

from types import SimpleNamespace as NS

import jax
import numpy as np
import pytest

from polykernel import BenchmarkConfig, BenchmarkRecord, XLACustomKernel
from polykernel.benchmark import BenchmarkResult, run_benchmark
from polykernel.benchmark.launch import describe, source_of
from polykernel.benchmark.launchnotes import LAUNCH_TITLE
from polykernel.benchmark.table import format_table


@pytest.fixture(scope="module")
def op():
    op = XLACustomKernel("launchtest.double")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: [2 * x], platform="cpu")
    # A second backend with a launch parameter (the generator ignores it).
    op.def_kernel(
        "numba",
        "cpu",
        lambda outs, block=256, **kw: lambda x: [x + x],
        tune={"block": [256, 128]},
    )

    def call(x, backend=None, **kw):
        out = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return op(x, outs=[out], backend=backend, **kw)[0]

    op.def_call(call)
    x = np.ones(64, np.float32)
    op.def_benchmark_data(
        lambda *, platform: [
            BenchmarkConfig("n=64", (x,)),
            BenchmarkConfig("n=64,block=128", (x,), {"block": 128}),
        ]
    )
    return op


def test_records_name_their_launch_parameters_and_why(op):
    result = run_benchmark(op, platform="cpu", n_warmup=1, n_runs=5, settle_s=1e-3)
    by = {(r.label, r.backend): r for r in result.records}
    default = by[("n=64", "numba")]
    assert default.launch_params == {"block": 256}
    assert default.launch_source == "default"  # nothing tuned: the first candidate
    given = by[("n=64,block=128", "numba")]
    assert (given.launch_params, given.launch_source) == ({"block": 128}, "given")
    reference = by[("n=64", "jax_raw")]
    assert (reference.launch_params, reference.launch_source) == ({}, None)
    # Round by round against the reference, timed in the same rounds.
    assert default.paired_base == "jax_raw" and default.paired_ratio > 0
    assert reference.paired_ratio == 1.0 and reference.paired_spread == 0.0
    text = result.table()
    assert LAUNCH_TITLE in text
    assert "  numba: block=256 (default) for n=64; block=128 (given) for " in text


def test_the_fields_survive_json_and_csv(op, tmp_path):
    result = run_benchmark(op, platform="cpu", n_warmup=0, n_runs=3)
    for suffix in (".json", ".csv"):
        back = BenchmarkResult.load(result.save(tmp_path / f"r{suffix}"))
        numba = next(r for r in back.records if r.backend == "numba")
        assert numba.launch_params == {"block": 256}, suffix
        assert numba.launch_source == "default" and numba.paired_base == "jax_raw"


def test_the_settling_calls_are_counted_from_the_steady_calls_not_the_first():
    # A kernel whose first calls after compiling are slow (pages, caches): 30 ms
    # each for its first four, then fast. The settling calls fill settle_s at the
    # speed of its steady calls; counted from the first warm-up calls alone, 12 ms
    # of settling would be no call at all.
    import time

    from polykernel.benchmark.case import CaseOptions, prepare_case
    from polykernel.benchmark.plan import plan_benchmark
    from polykernel.benchmark.sampling import StopRule

    calls = []

    def host(x):
        calls.append(1)
        if len(calls) <= 4:
            time.sleep(0.03)
        return np.asarray(x) * 2

    op = XLACustomKernel("launchtest.slow_start")
    op.def_jax_raw_kernel(
        lambda outs, **kw: lambda x: [jax.pure_callback(host, outs[0], x)],
        platform="cpu",
    )
    op.def_call(
        lambda x, backend=None: op(
            x, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)], backend=backend
        )[0]
    )
    x = np.ones(8, np.float32)
    op.def_benchmark_data(lambda *, platform: [BenchmarkConfig("n=8", (x,))])
    plan = plan_benchmark(op, platform="cpu")
    options = CaseOptions(
        StopRule(5, target_spread=0.1), n_warmup=3, n_batch_per_run=1,
        clock=time.perf_counter, settle_s=12e-3, reference_backend=None,
        catch_errors=False,
    )  # fmt: skip
    case = prepare_case(plan, plan.configs[0], jax.devices("cpu")[0], options, None)
    assert len(calls) > 4  # the adaptive warm-up ran past the slow calls
    assert case.settle["jax_raw"] >= 12  # fast calls of at most 1 ms each


def test_settle_s_is_checked(op):
    with pytest.raises(ValueError, match="settle_s must be >= 0"):
        run_benchmark(op, platform="cpu", n_runs=1, settle_s=-1.0)
    with pytest.raises(TypeError, match="settle_s must be seconds"):
        run_benchmark(op, platform="cpu", n_runs=1, settle_s="x")


def _entry(params):
    choice = NS(params=tuple(params.items()))
    return NS(best_of=lambda backend: choice)


@pytest.mark.parametrize(
    ("params", "from_call", "entry", "source"),
    [
        ({}, (), None, None),
        ({"block": 256}, (), None, "default"),
        ({"block": 256}, ("block",), None, "given"),
        ({"block": 256}, (), _entry({"block": 256}), "tuned"),
        ({"block": 256, "warps": 4}, ("warps",), _entry({"block": 256}), "given+tuned"),
    ],
    ids=["none", "default", "given", "tuned", "mixed"],
)
def test_the_source_of_launch_parameters(params, from_call, entry, source):
    decision = NS(params=params, from_call=from_call, entry=entry, backend="b")
    assert source_of(decision) == source
    assert describe(params, source) == (
        ""
        if not params
        else f"{', '.join(f'{k}={v!r}' for k, v in params.items())} ({source})"
    )


def _pair(label, base_ms, ms, ratio, spread):
    base = BenchmarkRecord("cpu", "jax_raw", label, median_ms=base_ms, primitive="p")
    rec = BenchmarkRecord("cpu", "numba", label, median_ms=ms, primitive="p")
    base.paired_base, base.paired_ratio, base.paired_spread = "jax_raw", 1.0, 0.0
    rec.paired_base, rec.paired_ratio, rec.paired_spread = "jax_raw", ratio, spread
    base.p25_ms, base.p75_ms = base_ms * 0.7, base_ms * 1.3  # a noisy time
    rec.p25_ms, rec.p75_ms = ms * 0.7, ms * 1.3
    return [base, rec]


def test_the_speed_up_is_the_paired_ratio():
    # Medians say 2.00x; the fast ends of the same rounds say 4.00x.
    records = _pair("n=1", 2.0, 1.0, 0.25, 0.05)
    assert "1 (4.00x)" in format_table(records)
    records[1].paired_base = "other"  # not against this baseline: the medians
    assert "1 (2.00x)" in format_table(records)


def test_speedup_first_leads_with_the_ratio_and_judges_its_spread():
    records = _pair("n=1", 2.0, 1.0, 0.25, 0.05) + _pair("n=2", 2.0, 1.0, 0.5, 0.4)
    text = format_table(records, speedup_first=True)
    lines = text.splitlines()
    assert lines[0] == "p on cpu: speed-up vs jax_raw, same rounds (median ms per call)"
    n1 = next(line for line in lines if line.startswith("n=1 "))
    n2 = next(line for line in lines if line.startswith("n=2 "))
    # The times are noisy (IQR 60%), the ratio of n=1 is not: no mark.
    assert "1.00x (2 ms)" in n1 and n1.endswith("4.00x (1 ms) *")
    assert n2.endswith("2.00x (1 ms) *!")
    assert "ratio spread numba 40% (bound 10%)" in " ".join(text.split())
    assert "the ratio's spread > 10%" in text


def test_the_cli_and_the_demo_settle_as_the_runner_does():
    from polykernel.benchmark.runner import SETTLE_S
    from polykernel.cli.benchmark import SETTLE_S as CLI_SETTLE_S
    from polykernel.demo import Settings

    assert CLI_SETTLE_S == SETTLE_S == Settings().settle_s


def test_a_spread_of_100_percent_or_more_is_not_printed_as_a_number():
    records = _pair("n=1", 2.0, 1.0, 0.5, 4.35)
    text = " ".join(format_table(records, speedup_first=True).split())
    assert "ratio spread numba 100%+ (bound 10%)" in text
    assert "435%" not in text
