"""``polykernel benchmark --compare OLD.json --fail-above RATIO``: a CI gate."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from polykernel import BenchmarkRecord
from polykernel.benchmark.regression import compare_records, format_comparison

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
    assert "1.50x SLOWER" in text.splitlines()[1]
    assert max(len(line) for line in text.splitlines()) <= 100


def test_a_record_that_fails_now_counts_against_the_gate(tmp_path):
    from polykernel.benchmark.regression import FAILED_NOW

    old = [_record("numba", "a", 1.0), _record("numba", "b", None)]
    failed = BenchmarkRecord("cpu", "numba", "a", primitive="p", success=False)
    matched, unmatched = compare_records(old, [failed, _record("numba", "b", 1.0)])
    assert matched == []
    assert unmatched == [f"p / cpu / numba / a: {FAILED_NOW}",
                         "p / cpu / numba / b: not timed in the old file"]  # fmt: skip


def test_a_change_within_the_noise_is_marked_noisy():
    old = [_record("numba", "a", 1.0, p25_ms=0.7, p75_ms=1.4)]
    new = [_record("numba", "a", 1.2)]
    (c,), _ = compare_records(old, new)
    assert c.noisy and "SLOWER (noisy)" in format_comparison([c], [], 1.1)


@pytest.fixture
def run(tmp_path, run_env):
    (tmp_path / "compare_ops.py").write_text(MODULE)

    def benchmark(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "polykernel.cli", "benchmark", "--no-catalog",
               "--module", "compare_ops.py", "--n-runs", "3", "--n-warmup", "1",
               "--target-spread", "0", "--no-progress", *args]  # fmt: skip
        return subprocess.run(cmd, env=run_env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)  # fmt: skip

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
    first = run("-o", "old.json")
    assert first.returncode == 0, first.stderr
    _scaled(tmp_path / "old.json", 1 / 50, tmp_path / "fast.json")  # 50x faster then
    _scaled(tmp_path / "old.json", 50, tmp_path / "slow.json")  # 50x slower then
    worse = run("--compare", "fast.json", "--fail-above", "1.10")
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "compare_cli.double / cpu / jax_raw / n=64" in worse.stdout
    assert "SLOWER" in worse.stdout
    assert (
        "--fail-above 1.1: 1 record slower than that (or failing now) against fast.json"
        in worse.stderr
    )
    better = run("--compare", "slow.json", "--fail-above", "1.10")
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
    ],
    ids=["no-compare", "missing-file", "zero"],
)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_usage_errors_exit_2(run, tmp_path, args, message):
    (tmp_path / "x.json").write_text("{}")
    done = run(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
