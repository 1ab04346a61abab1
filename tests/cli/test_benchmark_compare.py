"""``polykernel benchmark --compare OLD.json --fail-above RATIO``: a CI gate that
fails on a slower kernel and holds on identical code (issue 37)."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
import zygote

from polykernel import BenchmarkRecord
from polykernel.benchmark.regression import AUTO, compare_records, format_comparison

MODULE = textwrap.dedent(
    """
    import jax, numpy as np, polykernel as pk
    op = pk.XLACustomKernel("compare_cli.double")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    op.def_call(lambda x, backend=None: op(
        x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend))
    op.def_benchmark_data(lambda *, platform: [
        pk.BenchmarkConfig("n=64", (np.ones(64, np.float32),))])
    """
)


def _record(backend: str, label: str, ms: float | None, **kw) -> BenchmarkRecord:
    return BenchmarkRecord("cpu", backend, label, median_ms=ms, primitive="p", **kw)


def test_ratios_worst_first_and_unmatched_records_listed():
    old = [
        _record("numba", "a", 1.0),
        _record("numba", "b", 2.0),
        _record("c", "a", 1.0),
    ]
    new = [
        _record("numba", "a", 1.5),
        _record("numba", "b", 2.0),
        _record("d", "a", 1.0),
    ]
    matched, unmatched = compare_records(old, new)
    assert [(c.key[2:], round(c.ratio, 2)) for c in matched] == [
        (("numba", "a"), 1.5),
        (("numba", "b"), 1.0),
    ]
    assert unmatched == ["p / cpu / c / a: only in the old file",
                         "p / cpu / d / a: only in this run"]  # fmt: skip
    text = format_comparison(matched, unmatched, 1.1)
    assert text.splitlines()[1] == "p on cpu:"
    assert "numba / a" in text.splitlines()[2]
    assert text.splitlines()[2].endswith("1 ms       1.5 ms   1.50x    ±0% SLOWER")
    assert max(len(line) for line in text.splitlines()) <= 100


def test_a_record_that_fails_now_counts_against_the_gate(tmp_path):
    from polykernel.benchmark.regression import FAILED_NOW

    old = [_record("numba", "a", 1.0), _record("numba", "b", None)]
    failed = BenchmarkRecord("cpu", "numba", "a", primitive="p", success=False)
    matched, unmatched = compare_records(old, [failed, _record("numba", "b", 1.0)])
    assert matched == []
    assert unmatched == [f"p / cpu / numba / a: {FAILED_NOW}",
                         "p / cpu / numba / b: not timed in the old file"]  # fmt: skip


def test_a_change_within_the_noise_is_marked_and_does_not_fail():
    old = [_record("numba", "a", 1.0, p25_ms=0.7, p75_ms=1.4)]
    new = [_record("numba", "a", 1.2)]
    (c,), _ = compare_records(old, new)
    assert c.noisy and not c.slower(1.1)
    text = format_comparison([c], [], 1.1)
    assert "within spread" in text and "SLOWER" not in text


def _case(jax_ms, numba_ms, ratio=None, spread=0.05, **kw):
    """One case timed on two backends; ``ratio``: numba's paired ratio."""
    common = {"p25_ms": None, "p75_ms": None}
    ref = _record("jax_raw", "a", jax_ms, **common)
    rec = _record("numba", "a", numba_ms, **common | kw)
    ref.p25_ms, ref.p75_ms = jax_ms * (1 - spread / 2), jax_ms * (1 + spread / 2)
    rec.p25_ms, rec.p75_ms = numba_ms * (1 - spread / 2), numba_ms * (1 + spread / 2)
    if ratio is not None:
        rec.paired_base, rec.paired_ratio, rec.paired_spread = "jax_raw", ratio, spread
    return [ref, rec]


def test_a_machine_wide_slowdown_cancels_relative_to_the_reference():
    # The whole machine 1.6x slower in the second run: every time moved alike.
    old, new = _case(1.0, 0.5, 0.5), _case(1.6, 0.8, 0.5)
    absolute, _ = compare_records(old, new)
    assert [c.slower(1.1) for c in absolute] == [True, True]  # the old gate: 2 fail
    relative, _ = compare_records(old, new, relative_to=AUTO)
    by_backend = {c.key[2]: c for c in relative}
    assert by_backend["numba"].base == "jax_raw"
    assert by_backend["numba"].ratio == pytest.approx(1.0)
    assert not by_backend["numba"].slower(1.1)
    assert not by_backend["jax_raw"].judged  # the reference itself: listed only
    text = format_comparison(relative, [], 1.1)
    assert "SLOWER" not in text and "reference" in text
    assert "0.5x" in text  # the values compared: ratios to jax_raw


def test_a_kernel_slowed_by_half_fails_relative_to_the_reference():
    old, new = _case(1.0, 0.5, 0.5), _case(1.6, 1.2, 0.75)  # machine 1.6x, kernel 1.5x
    (ref, kernel), _ = compare_records(old, new, relative_to=AUTO)
    assert kernel.key[2] == "numba" and kernel.ratio == pytest.approx(1.5)
    assert kernel.slower(1.1) and not ref.slower(1.1)
    assert "SLOWER" in format_comparison([ref, kernel], [], 1.1)


def test_a_reference_that_got_faster_alone_is_not_the_kernels_regression():
    # What CI saw on identical code: the reference (a host callback) 0.62x, the
    # kernel's own time 0.76x, so its ratio to the reference 1.22x, twice.
    old, new = _case(1.082, 0.671, 0.6203), _case(0.672, 0.510, 0.7596)
    (ref, kernel), _ = compare_records(old, new, relative_to=AUTO)
    assert kernel.ratio == pytest.approx(1.22, abs=0.01) and kernel.low > 1.1
    assert kernel.time_ratio == pytest.approx(0.76, abs=0.01)
    assert kernel.time_held(1.1) and not kernel.slower(1.1)
    text = format_comparison([ref, kernel], [], 1.1)
    line = next(x for x in text.splitlines() if "numba / a" in x)
    assert line.endswith(" time held") and "SLOWER" not in text
    assert "time held: slower relative to jax_raw only" in " ".join(text.split())
    # Its own time slower too (by more than the bound): a regression.
    (_, kernel), _ = compare_records(old, _case(0.672, 0.76, 1.13), relative_to=AUTO)
    assert kernel.time_ratio > 1.1 and kernel.slower(1.1)
    # Its own time is its fastest round where both files have one: a burst of
    # load moves the median, not the minimum.
    old[1].min_ms, new[1].min_ms = 0.60, 0.61
    (_, kernel), _ = compare_records(old, new, relative_to=AUTO)
    assert kernel.time_ratio == pytest.approx(0.61 / 0.60)


def test_without_paired_ratios_the_medians_are_compared_with_both_spreads():
    old, new = _case(1.0, 0.5, spread=0.2), _case(2.0, 1.5, spread=0.2)
    (_, kernel), _ = compare_records(old, new, relative_to=AUTO)
    assert kernel.ratio == pytest.approx(1.5)  # (1.5 / 2.0) / (0.5 / 1.0)
    assert kernel.spread == pytest.approx(0.8)  # 2 records x 2 runs x 20 %
    assert kernel.low == pytest.approx(1.5 * 0.8 / 1.2)
    assert kernel.slower(0.99) and not kernel.slower(1.1)


def test_a_case_timed_on_the_reference_alone_is_judged_by_its_times():
    old, new = _case(1.0, 0.5, 0.5)[:1], _case(1.6, 0.8, 0.5)[:1]
    (c,), _ = compare_records(old, new, relative_to=AUTO)
    assert c.judged and c.base is None and c.slower(1.1)


def test_relative_to_a_named_backend_and_to_none():
    old, new = _case(1.0, 0.5, 0.5), _case(1.6, 0.8, 0.5)
    matched, _ = compare_records(old, new, relative_to="numba")
    ref = next(c for c in matched if c.key[2] == "jax_raw")
    assert ref.base == "numba" and ref.ratio == pytest.approx(1.0)
    matched, _ = compare_records(old, new, relative_to="missing")
    assert all(c.base is None for c in matched)  # no such backend: the times


def test_a_spread_of_100_percent_or_more_is_printed_noisy():
    old = [_record("numba", "a", 1.0, p25_ms=0.2, p75_ms=1.4)]
    new = [_record("numba", "a", 1.0, p25_ms=0.1, p75_ms=1.5)]
    text = format_comparison(*compare_records(old, new), 1.1)
    assert " noisy" in text and "%" not in text.splitlines()[2]


def test_a_long_config_gets_its_own_line_nothing_is_cut():
    label = "20000x10000,p=0.05,rate=0.01,with,a,long,tail,of,options"
    old = [_record("numba_cuda", label, 1.0)]
    new = [_record("numba_cuda", label, 1.0)]
    lines = format_comparison(*compare_records(old, new), 1.1).splitlines()
    assert f"  numba_cuda / {label}" in lines
    assert max(len(line) for line in lines) <= 100


@pytest.fixture
def run(tmp_path, run_env):
    (tmp_path / "compare_ops.py").write_text(MODULE)

    # Nine runs: with three, one slow run on a loaded machine (CI: load average 3)
    # puts the IQR above the median, and a 40x change reads "within spread".
    def benchmark(*args: str) -> subprocess.CompletedProcess:
        cmd = ["-m", "polykernel.cli", "benchmark", "--no-catalog",
               "--module", "compare_ops.py", "--n-runs", "9", "--n-warmup", "2",
               "--target-spread", "0", "--no-progress", *args]  # fmt: skip
        return zygote.run(cmd, env=run_env, cwd=tmp_path, timeout=300)

    return benchmark


def _scaled(path, factor: float, target) -> None:
    data = json.loads(path.read_text())
    for record in data["records"]:
        for field in ("median_ms", "mean_ms", "min_ms", "p25_ms", "p75_ms", "max_ms"):
            if record.get(field) is not None:
                record[field] *= factor
    target.write_text(json.dumps(data))


@pytest.mark.slow
def test_the_gate_fails_on_a_slower_run_and_passes_otherwise(run, tmp_path):
    first = run("-o", "old.json", "--processes", "1")
    assert first.returncode == 0, first.stderr
    _scaled(tmp_path / "old.json", 1 / 50, tmp_path / "fast.json")  # 50x faster then
    _scaled(tmp_path / "old.json", 50, tmp_path / "slow.json")  # 50x slower then
    # One process each: 50x is far beyond what differs between processes.
    worse = run("--compare", "fast.json", "--fail-above", "1.10", "--processes", "1")
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "compare_cli.double on cpu:\n  jax_raw / n=64 " in worse.stdout
    assert "SLOWER" in worse.stdout  # the reference alone: judged by its times
    assert (
        "--fail-above 1.1: 1 record slower than that beyond the spread of both runs "
        "(or failing now) against fast.json" in worse.stderr
    )
    better = run("--compare", "slow.json", "--fail-above", "1.10", "--processes", "1")
    assert better.returncode == 0, better.stderr
    assert "SLOWER" not in better.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--fail-above", "1.1"), "--fail-above needs --compare OLD.json"),
        (("--compare", "missing.json"), "--compare missing.json:"),
        (
            ("--compare", "x.json", "--fail-above", "0"),
            "--fail-above must be a ratio > 0",
        ),
        (("--relative-to", "numba"), "--relative-to needs --compare OLD.json"),
        (
            ("--compare", "old.json", "--relative-to", "numba"),
            "--relative-to numba: no record of old.json has that backend",
        ),
    ],
    ids=["no-compare", "missing-file", "zero", "relative-alone", "relative-unknown"],
)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_usage_errors_exit_2(run, tmp_path, args, message):
    (tmp_path / "x.json").write_text("{}")
    record = _record("jax_raw", "n=64", 1.0).to_dict()
    (tmp_path / "old.json").write_text(json.dumps({"records": [record]}))
    done = run(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr


# A real Numba kernel and a reference doing the same single-threaded work (the
# reference through a host callback into the same loop), so that the load of a
# shared machine slows both alike; TEST_COMPARE_REPS=48 makes the kernel 1.5x slower
# (TEST_COMPARE_REPS_FIRST: only in the first timing of the process). 32 rounds of
# sines per element, about 3 ms: the callback's own cost (0.1-0.4 ms, moving
# with the load) stays a small part of the reference's time. (TEST_*: variables
# the zygote gives each child, which then share one zygote.)
WORK_MODULE = textwrap.dedent(
    """
    import os
    import jax, numba, numpy as np, polykernel as pk

    REPS = int(os.environ.get("TEST_COMPARE_REPS", "32"))
    FIRST = int(os.environ.get("TEST_COMPARE_REPS_FIRST", REPS))
    timings = []

    @numba.njit(cache=True)
    def loop(x, out, reps):
        for i in range(x.size):
            v = x[i]
            for _ in range(reps):
                v = np.sin(v) * np.float32(0.5) + np.float32(0.25)
            out[i] = v

    @numba.njit
    def kernel(x, reps, out):
        loop(x, out, reps[0])

    def reference(x, reps):
        out = np.empty_like(x)
        loop(np.asarray(x), out, 32)
        return out

    def data(*, platform):
        timings.append(platform)
        reps = FIRST if len(timings) == 1 else REPS
        x = np.linspace(0, 1, 10000, dtype=np.float32)
        return [pk.BenchmarkConfig("n=10000", (x, np.array([reps], np.int64)))]

    op = pk.XLACustomKernel("compare_work.sines")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x, r: [
        jax.pure_callback(reference, outs[0], x, r)], platform="cpu")
    op.def_numba_kernel(lambda outs, **kw: (lambda x, r: [
        pk.numba_kernel(kernel, outs[0])(x, r)]))
    op.def_call(lambda x, r, backend=None: op(
        x, r, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)], backend=backend)[0])
    op.def_benchmark_data(data)
    """
)


@pytest.mark.slow
def test_identical_code_twice_passes_and_a_kernel_slowed_by_half_fails(
    tmp_path, run_env
):
    (tmp_path / "work_ops.py").write_text(WORK_MODULE)

    def benchmark(reps: int, *args: str, first=None) -> subprocess.CompletedProcess:
        cmd = ["-m", "polykernel.cli", "benchmark", "--no-catalog",
               "--module", "work_ops.py", "--no-progress", *args]  # fmt: skip
        env = run_env | {"TEST_COMPARE_REPS": str(reps),
                         "TEST_COMPARE_REPS_FIRST": str(first or reps)}  # fmt: skip
        return zygote.run(cmd, env=env, cwd=tmp_path, timeout=300)

    first = benchmark(32, "-o", "old.json")
    assert first.returncode == 0, first.stdout + first.stderr
    record = json.loads((tmp_path / "old.json").read_text())["records"][1]
    assert record["backend"] == "numba" and record["paired_base"] == "jax_raw"
    assert record["processes"] == 2  # this process and a fresh one, joined
    again = benchmark(32, "--compare", "old.json", "--fail-above", "1.10")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "numba / n=10000" in again.stdout and "SLOWER" not in again.stdout
    # Baseline and identical code above in two processes each (the default with
    # --output and --compare); the slowed kernels need not be.
    slowed = benchmark(
        48, "--compare", "old.json", "--fail-above", "1.10", "--processes", "1"
    )
    assert slowed.returncode == 1, slowed.stdout + slowed.stderr
    line = next(x for x in slowed.stdout.splitlines() if "numba / n=10000" in x)
    assert line.endswith("SLOWER") and "x" in line.split()[3]  # a ratio to jax_raw
    # Confirmed by a second timing of that primitive, also slower.
    confirm = slowed.stdout.split("timed again to confirm")[1]
    line = next(x for x in confirm.splitlines() if "numba / n=10000" in x)
    assert line.endswith("SLOWER")
    # Slower in the first timing only (a burst of load): not a regression. 2x in
    # the first timing against a 1.3 bound: under CI load (the other worker busy)
    # identical code's ratio alone moves up to ~1.25x between runs.
    once = benchmark(32, "--compare", "old.json", "--fail-above", "1.3",
                     "--processes", "1", first=64)  # fmt: skip
    assert once.returncode == 0, once.stdout + once.stderr
    first, confirm = once.stdout.split("timed again to confirm")
    assert "SLOWER" in first and "SLOWER" not in confirm
