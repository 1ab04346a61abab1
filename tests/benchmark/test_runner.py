"""run_benchmark through a real XLACustomKernel with pure-JAX kernels."""

from __future__ import annotations

import io
import itertools
import json
import warnings

import jax
import numpy as np
import pytest
from machine_support import gpus_jax_sees

import polykernel as pk
from polykernel.benchmark import BenchmarkConfig, BenchmarkResult, Progress
from polykernel.benchmark.machine import environment_lines
from polykernel.benchmark.runner import plan_benchmark, run_benchmark
from polykernel.core import registry
from polykernel.dispatch import table
from polykernel.errors import (
    BenchmarkDataFnNotProvidedError,
    BenchmarkMismatchWarning,
)

FAST = {"n_warmup": 1, "n_runs": 3}


def _configs(*, platform):
    assert platform == "cpu"
    return [
        BenchmarkConfig("n=8", (np.arange(8, dtype=np.float32),), work=(64, "B")),
        BenchmarkConfig("n=3", (np.ones(3, np.float32),), data_kwargs={"n": 3}),
    ]


def _op(name, numba_offset=0.0, data=True, call=True, tags=()):
    """A primitive with a reference (jax_raw) and a second 'numba' kernel."""
    op = pk.XLACustomKernel(name)
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: [x * 2.0], platform="cpu")
    op.def_kernel("numba", "cpu", lambda outs, **kw: lambda x: [x * 2.0 + numba_offset])
    if call:

        def call_fn(x, *, backend=None):
            out = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return op(x, outs=[out], backend=backend)[0]

        op.def_call(call_fn)
    if data:
        op.def_benchmark_data(_configs)
    op.def_tags(*tags)
    return op


@pytest.fixture
def make_op(request):
    created = []

    def make(**kw):
        name = f"testbench.{request.node.name}.{len(created)}"
        created.append(name)
        return _op(name, **kw)

    yield make
    for name in created:
        registry.unregister(name)


def test_agreeing_backends_record_statistics(make_op):
    op = make_op()
    result = op.benchmark(platform="cpu", **FAST)
    assert isinstance(result, BenchmarkResult)
    assert result.primitive_name == op.name
    assert [(r.label, r.backend) for r in result] == [
        ("n=8", "jax_raw"),
        ("n=8", "numba"),
        ("n=3", "jax_raw"),
        ("n=3", "numba"),
    ]
    for r in result:
        assert r.success and r.error is None and r.platform == "cpu"
        assert r.primitive == op.name and r.n == 3
        assert 0 < r.min_ms <= r.p25_ms <= r.median_ms <= r.p75_ms <= r.max_ms
        assert r.compile_ms > 0 and r.std_ms >= 0
        assert r.reference_backend == "jax_raw"
    numba8 = result.records[1]
    assert numba8.matches_reference is True and numba8.max_abs_diff == 0.0
    assert numba8.throughput == pytest.approx(64 / (numba8.median_ms * 1e-3))
    assert numba8.throughput_unit == "B/s"
    assert result.records[2].throughput is None
    assert result.records[2].data_kwargs == {"n": 3}
    assert result.mismatches == [] and result.failures == []


def test_mismatch_is_recorded_warned_and_tabled(make_op):
    op = make_op(numba_offset=0.5)
    with pytest.warns(
        BenchmarkMismatchWarning,
        match=r"config 'n=[38]': backend "
        r"'numba' disagrees with reference 'jax_raw' \(output 0: max "
        r"\|diff\| 0.5; rtol=0.001, atol=0.001\).*BenchmarkResult"
        r".mismatches",
    ) as caught:
        result = op.benchmark(platform="cpu", **FAST)
    assert len(caught) == 2 and caught[0].filename == __file__
    assert [(m.label, m.backend, m.reference) for m in result.mismatches] == [
        ("n=8", "numba", "jax_raw"),
        ("n=3", "numba", "jax_raw"),
    ]
    assert result.mismatches[0].max_abs_diff == pytest.approx(0.5)
    assert result.records[1].matches_reference is False
    table = result.table()
    assert "MISMATCH" in table and "numba vs jax_raw, max |diff| = 0.5" in table
    # Looser tolerances accept the difference; no comparison at all records None.
    loose = op.benchmark(platform="cpu", atol=1.0, **FAST)
    assert loose.mismatches == []
    off = op.benchmark(platform="cpu", compare_results=False, **FAST)
    assert {r.matches_reference for r in off} == {None}


def test_reference_backend_can_be_chosen(make_op):
    op = make_op(numba_offset=0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BenchmarkMismatchWarning)
        result = run_benchmark(op, platform="cpu", reference_backend="numba", **FAST)
    assert {m.reference for m in result.mismatches} == {"numba"}
    assert {m.backend for m in result.mismatches} == {"jax_raw"}


def test_backends_argument_restricts(make_op):
    op = make_op()
    result = op.benchmark(platform="cpu", backends=["numba"], **FAST)
    assert {r.backend for r in result} == {"numba"}
    with pytest.raises(
        ValueError,
        match=r"backends=\['pallas'\] not all registered "
        r"for platform 'cpu' \(registered: \['jax_raw', 'numba'\]\)",
    ):
        op.benchmark(platform="cpu", backends=["pallas"])


def test_fake_clock_gives_exact_statistics(make_op):
    op = make_op()
    ticks = itertools.count(0.0, 0.002)  # every clock read advances 2 ms
    result = run_benchmark(
        op,
        platform="cpu",
        n_warmup=0,
        n_runs=4,
        n_batch_per_run=2,
        clock=lambda: next(ticks),
        compare_results=False,
    )
    for r in result:
        assert r.compile_ms == pytest.approx(2.0)
        assert r.median_ms == pytest.approx(1.0)  # 2 ms interval / 2 calls
        assert r.std_ms == pytest.approx(0.0, abs=1e-9) and r.n == 4
        assert r.n_batch_per_run == 2 and not r.noisy


def test_failing_backend_is_recorded_or_raised(make_op):
    op = make_op()

    def broken(outs, **kw):
        raise RuntimeError("generator exploded")

    op.def_kernel("cuda_raw", "cpu", broken)
    result = op.benchmark(platform="cpu", **FAST)
    bad = [r for r in result if r.backend == "cuda_raw"]
    assert len(bad) == 2 and not any(r.success for r in bad)
    assert "generator exploded" in bad[0].error and bad[0].median_ms is None
    assert "FAILED" in result.table()
    assert result.fastest("n=8").backend in ("jax_raw", "numba")
    with pytest.raises(Exception, match="generator exploded"):
        op.benchmark(platform="cpu", catch_errors=False, **FAST)


def test_verbose_prints_one_line_per_pair(make_op, capsys):
    op = make_op()
    op.benchmark(platform="cpu", verbose=True, **FAST)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith(f"{op.name} [cpu] n=8 / jax_raw: median ")
    assert "compile" in lines[0]


def test_progress_lines_without_tty(make_op):
    op = make_op()
    out = io.StringIO()
    with Progress(out) as progress:
        run_benchmark(op, platform="cpu", progress=progress, **FAST)
    assert out.getvalue().splitlines() == [
        f"[1/4] {op.name} | n=8 | jax_raw",
        f"[2/4] {op.name} | n=8 | numba",
        f"[3/4] {op.name} | n=3 | jax_raw",
        f"[4/4] {op.name} | n=3 | numba",
    ]


def test_progress_bar_on_tty():
    out = io.StringIO()
    with Progress(out, tty=True) as progress:
        progress.add_total(2)
        progress.advance("p", "c", "b")
        progress.advance("p", "c", "b2")
    text = out.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n")
    assert "[############------------] 1/2 p | c | b" in text


def test_missing_pieces_raise_clear_errors(make_op):
    with pytest.raises(
        BenchmarkDataFnNotProvidedError,
        match=r"no benchmark data "
        r"function\. Register one with def_benchmark_data\(fn\)",
    ):
        make_op(data=False).benchmark(platform="cpu")
    with pytest.raises(
        ValueError,
        match=r"no call function\. Register the "
        r"user-facing wrapper with def_call\(fn\)",
    ):
        make_op(call=False).benchmark(platform="cpu")
    with pytest.raises(
        ValueError,
        match=r"no backend is registered for platform "
        r"'gpu' \(registered: \{'cpu': \['jax_raw', 'numba'\]\}\)",
    ):
        make_op().benchmark(platform="gpu")
    with pytest.raises(ValueError, match=r"n_runs must be an integer >= 1, got 0"):
        make_op().benchmark(platform="cpu", n_runs=0)


def test_bad_data_function_and_unavailable_platform(make_op):
    op = make_op()
    op.def_benchmark_data(lambda *, platform: [1, 2])
    with pytest.raises(
        TypeError,
        match=r"must return a non-empty list of "
        r"BenchmarkConfig, got items of type \['int'\]",
    ):
        op.benchmark(platform="cpu")
    op.def_benchmark_data(lambda *, platform: [])
    with pytest.raises(TypeError, match=r"got an empty list"):
        op.benchmark(platform="cpu")
    tpu_op = make_op()  # a TPU is never visible here, a GPU may be (make test-gpu)
    tpu_op.def_jax_raw_kernel(lambda outs, **kw: lambda x: [x], platform="tpu")
    tpu_op.def_benchmark_data(lambda *, platform: _configs(platform="cpu"))
    with pytest.raises(
        ValueError,
        match=r"platform 'tpu' is not available to JAX "
        r"in this process \(available: \['cpu'(, 'gpu')?\]\)",
    ):
        tpu_op.benchmark(platform="tpu")


def test_save_defaults_persists_and_kernels_pick_it_up(make_op, tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "cfg"))
    op = make_op()
    ticks = itertools.count(0.0, 0.001)
    result = run_benchmark(op, platform="cpu", clock=lambda: next(ticks), **FAST)
    # Equal fake timings: the tie goes to the first backend, jax_raw; make numba
    # win instead by editing the records (the selection rule is under test).
    for r in result:
        if r.backend == "numba":
            r.median_ms /= 2
    assert result.save_defaults() == {op.name: {"cpu": "numba"}}
    (saved,) = table.entries_for(op.name)
    assert (saved.scope, saved.winner.backend, saved.key.bucket) == (
        "saved_default", "numba", None)  # fmt: skip
    registry.unregister(op.name)
    fresh = _op(op.name)  # same name and code, new process-like kernel
    spec = jax.ShapeDtypeStruct((8,), np.float32)
    d = fresh.dispatch(spec, outs=[spec], platform="cpu")
    assert (d.backend, d.reason, d.level) == ("numba", "saved_default", 5)
    assert fresh.get_default("cpu") == "jax_raw"  # the registry's own default


def test_saved_defaults_keep_the_registered_default_within_the_spread(
    make_op, tmp_path, monkeypatch
):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "cfg"))
    op = make_op()
    ticks = itertools.count(0.0, 0.001)
    result = run_benchmark(op, platform="cpu", clock=lambda: next(ticks), **FAST)
    for r in result:
        if r.backend == "numba":
            r.median_ms *= 0.99  # 1% faster: within what a timing resolves
    assert result.save_defaults() == {op.name: {"cpu": "jax_raw"}}


def test_records_not_measured_here_are_not_saved_as_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "cfg"))
    made = BenchmarkResult(
        [pk.BenchmarkRecord("cpu", "a", "n=1", median_ms=1.0, primitive="p.q")]
    )
    with pytest.raises(
        pk.BenchmarkValueError,
        match=r"save_defaults: the records of \[\('p.q', 'cpu'\)\] were not measured "
        r"by a benchmark run of this process",
    ):
        made.save_defaults()
    assert not (tmp_path / "cfg").exists()


def test_plans_give_one_progress_total_for_several_primitives(make_op):
    ops = [make_op(), make_op()]
    plans = [plan_benchmark(op, platform="cpu") for op in ops]
    assert [p.steps for p in plans] == [4, 4]
    assert plans[0].backends == ("jax_raw", "numba")
    assert [c.name for c in plans[0].configs] == ["n=8", "n=3"]
    out = io.StringIO()
    with Progress(out) as progress:
        progress.add_total(sum(p.steps for p in plans))
        for op, plan in zip(ops, plans, strict=True):
            run_benchmark(op, platform="cpu", progress=progress, plan=plan, **FAST)
    lines = out.getvalue().splitlines()
    assert [line.split()[0] for line in lines] == [f"[{i}/8]" for i in range(1, 9)]
    assert lines[4] == f"[5/8] {ops[1].name} | n=8 | jax_raw"


def test_plan_must_match_the_run(make_op):
    op, other = make_op(), make_op()
    plan = plan_benchmark(op, platform="cpu", backends="numba")
    assert plan.backends == ("numba",) and plan.steps == 2
    result = run_benchmark(op, platform="cpu", plan=plan, backends=["numba"], **FAST)
    assert {r.backend for r in result} == {"numba"}
    with pytest.raises(
        ValueError,
        match=rf"run_benchmark of '{other.name}' on 'cpu': the plan was made for "
        rf"'{op.name}' on 'cpu' with backends \['numba'\]",
    ):
        run_benchmark(other, platform="cpu", plan=plan)
    with pytest.raises(ValueError, match=r"the plan was made for"):
        run_benchmark(op, platform="cpu", plan=plan, backends=["jax_raw"])


def test_failed_runs_record_nan_like_the_reference(make_op):
    op = make_op()
    op.def_kernel("cuda_raw", "cpu", lambda outs, **kw: 1 / 0)
    result = op.benchmark(platform="cpu", backends=["cuda_raw"], **FAST)
    rec = result.records[0]
    assert not rec.success and rec.error.startswith("KernelCompilationError")
    assert "ZeroDivisionError" in rec.error
    assert all(np.isnan(v) for v in (rec.mean_ms, rec.std_ms, rec.min_ms))
    assert rec.median_ms is None and result.fastest() is None
    assert f"{rec.mean_ms:.3f}" == "nan"  # reference-style formatting keeps working


def test_adaptive_run_records_its_bound_and_why_it_stopped(make_op):
    op = make_op()
    ticks = itertools.count(0.0, 0.002)  # every interval 2 ms: no spread at all
    result = run_benchmark(
        op,
        platform="cpu",
        n_warmup=0,
        n_runs=4,
        clock=lambda: next(ticks),
        target_spread=0.05,
        time_budget_s=1.0,
    )
    for r in result:
        assert r.n == 4 and r.stopped_by == "spread" and r.spread_bound == 0.05
        assert not r.noisy and r.noise_note is None
    fixed = run_benchmark(op, platform="cpu", **FAST)
    assert {(r.stopped_by, r.spread_bound) for r in fixed} == {("runs", None)}
    with pytest.raises(ValueError, match=r"target_spread must be a number above 0"):
        run_benchmark(op, platform="cpu", target_spread=-0.1, **FAST)


def test_the_result_names_the_machine_and_the_load(make_op, tmp_path):
    result = make_op().benchmark(platform="cpu", **FAST)
    env = result.environment
    assert set(env) == {"machine", "load"}
    assert env["machine"]["cores"] >= 1
    assert env["machine"]["gpus"] == gpus_jax_sees()  # none under make test
    load = env["load"]
    assert set(load) == {
        "loadavg_before",
        "loadavg_after",
        "other_running_before",
        "other_running_after",
        "other_cpu_share",
        "cores",
        "seconds",
    }
    assert 0.0 <= load["other_cpu_share"] <= 1.0 and len(load["loadavg_after"]) == 3
    header = environment_lines(result.environment)
    assert header.startswith("machine: ") and "\nload: 1-min load average " in header
    assert all(len(line) <= 100 for line in header.splitlines())
    # JSON keeps it (after the reference's keys); CSV has no place for it.
    data = json.loads(result.save(tmp_path / "r.json").read_text())
    assert list(data)[:4] == ["primitive_name", "records", "format", "version"]
    assert data["machine"] == env["machine"] and data["load"] == env["load"]
    assert BenchmarkResult.load(tmp_path / "r.json").environment == env
    assert BenchmarkResult.load(result.save(tmp_path / "r.csv")).environment is None
    # Several results: one machine, the load from the first start to the last end.
    both = BenchmarkResult.combine([result, result])
    assert both.environment["machine"] == env["machine"]
    assert both.environment["load"]["seconds"] == pytest.approx(2 * load["seconds"])
    with pytest.raises(TypeError, match=r"environment must be a dict"):
        BenchmarkResult([], environment="x86")
