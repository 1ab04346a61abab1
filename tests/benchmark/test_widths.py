"""Terminal output fits 100 columns (issue 29): the demo's and the CLI's tables.

The fast tests render real demo results (``docs/data/*/demo-results.json``: every
catalog primitive on the CPU, and a GPU machine's run with more backends) and a
synthetic worst case the way ``make demo`` and ``polykernel benchmark`` print them;
the slow one runs ``polykernel benchmark`` on the whole catalog.
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from subprocess_support import REPO

from polykernel.benchmark import BenchmarkRecord, BenchmarkResult
from polykernel.benchmark.table import TABLE_WIDTH

DATA = REPO / "docs" / "data"
RESULTS = sorted(DATA.glob("*/demo-results.json"))


def wide_lines(text: str, width: int = TABLE_WIDTH) -> list[str]:
    return [line for line in text.splitlines() if len(line) > width]


def per_primitive(result: BenchmarkResult) -> list[BenchmarkResult]:
    """The demo's tables: one result per (primitive, platform)."""
    groups: dict[tuple[str, str], list[BenchmarkRecord]] = {}
    for r in result:
        groups.setdefault((r.primitive, r.platform), []).append(r)
    return [BenchmarkResult(recs, primitive_name=p) for (p, _), recs in groups.items()]


def worst_case() -> BenchmarkResult:
    """Seven backends with long cells, long labels, a failure, a mismatch, noise."""
    records = []
    backends = ["jax_raw", "numba", "numba_cuda", "cuda_raw"]
    backends += ["pallas", "triton", "warp"]
    for prim in ("polykernel.catalog.event_csrmv", "some.long.namespace.operator"):
        for label in ("20000x10000,p=0.05,rate=0.01", "n=1e+03"):
            for i, b in enumerate(backends):
                median = 123.456 / (i + 1)
                records.append(
                    BenchmarkRecord(
                        "cpu" if i % 2 else "gpu",
                        b,
                        label,
                        mean_ms=median,
                        median_ms=median,
                        p25_ms=median * 0.7,
                        p75_ms=median * 1.4,
                        n=10_000,
                        primitive=prim,
                        throughput=1.2345e9,
                        throughput_unit="B/s",
                        reference_backend="jax_raw",
                        matches_reference=i != 3,
                        max_abs_diff=math.inf if i == 3 else 0.0,
                        spread_bound=0.05,
                        stopped_by="budget",
                    )
                )
            records.append(
                BenchmarkRecord(
                    "cpu",
                    "broken_backend_with_a_long_name",
                    label,
                    success=False,
                    error="KernelCompilationError: " + "a very long error " * 12,
                    primitive=prim,
                )
            )
    return BenchmarkResult(records)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}-data")
def test_the_demo_tables_of_real_results_fit(path):
    from polykernel.demo import render

    combined = BenchmarkResult.load(path)
    text = render(per_primitive(combined), combined, "")
    assert "== polykernel.catalog.csrmv ==" in text
    assert wide_lines(text) == []


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: f"{p.parent.name}-data")
def test_the_cli_table_of_real_results_fits(path):
    text = BenchmarkResult.load(path).table()  # what `polykernel benchmark` prints
    assert wide_lines(text) == []
    # Split into one table per primitive and platform, each named.
    assert "polykernel.catalog.csrmv on cpu:" in text


def test_a_worst_case_table_fits_and_keeps_every_cell():
    result = worst_case()
    text = result.table()
    assert wide_lines(text) == []
    unlimited = result.table(width=None)
    assert wide_lines(unlimited) != []  # the same table without the limit is wider
    for rec in result:
        assert rec.backend in text and rec.label in text
    assert text.count("MISMATCH ") == 4 and text.count("FAILED ") == 4
    assert "NOISY polykernel.catalog.event_csrmv [gpu] n=1e+03:" in text
    assert (
        "IQR / median jax_raw 70%, numba_cuda 70%, pallas 70%, warp 70% (bound 5%) "
        "over 10000 runs; the case's time budget ran out"
    ) in " ".join(text.split())
    for per in per_primitive(result):
        assert wide_lines(per.table()) == []


def test_a_narrow_table_is_not_split():
    recs = [
        BenchmarkRecord("cpu", b, "n=1", median_ms=1.0, p25_ms=1.0, p75_ms=1.0)
        for b in ("a", "b")
    ]
    lines = BenchmarkResult(recs, "p").table().splitlines()
    assert lines[1].split(" | ") == ["config", "a (baseline)", "b"]
    assert "" not in lines[:4]


@pytest.mark.slow
def test_polykernel_benchmark_on_the_catalog_fits(run_env):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "polykernel.cli",
            "benchmark",
            "--n-warmup",
            "0",
            "--n-runs",
            "1",
            "--time-budget",
            "0",
            "--no-progress",
        ],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "machine: " in proc.stdout and "load: " in proc.stdout
    assert "polykernel.catalog.lif_step on cpu:" in proc.stdout
    assert wide_lines(proc.stdout) == [] and wide_lines(proc.stderr) == []
    assert "Warp CUDA warning" not in proc.stderr
