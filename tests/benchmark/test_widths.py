"""Terminal output fits 100 columns (issue 29): the demo's and the CLI's tables.

The fast tests render real demo results (``docs/data/*/demo-results.json``: every
catalog primitive on the CPU, and a GPU machine's run with more backends) and a
synthetic worst case the way ``make demo`` and ``polykernel benchmark`` print them;
the slow one runs ``polykernel benchmark`` on the whole catalog.
"""

from __future__ import annotations

import math

import pytest
import zygote
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
    # A child of the test process's zygote: as `python -m polykernel.cli` runs
    # (what it prints does not depend on whether JAX was imported before it).
    proc = zygote.run(
        [
            "-m",
            "polykernel.cli",
            "benchmark",
            "--n-warmup",
            "0",
            "--n-runs",
            "1",
            "--time-budget",
            "0",
            # Exactly one timed call per backend, none untimed before it: the
            # output's shape does not depend on the times (an adaptive run would
            # first warm each of the ~45 backend cases up for 0.2 s).
            "--target-spread",
            "0",
            "--settle",
            "0",
            "--no-progress",
        ],
        env=run_env,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "machine: " in proc.stdout and "load: " in proc.stdout
    assert "polykernel.catalog.lif_step on cpu:" in proc.stdout
    assert wide_lines(proc.stdout) == [] and wide_lines(proc.stderr) == []
    assert "Warp CUDA warning" not in proc.stderr


# Issue 37, item 5: every command's output within 100 columns, nothing cut.


def test_polykernel_info_wraps_each_backend_row(capsys):
    from polykernel.cli.info import _print_text, gather_info

    info = gather_info()
    detail = "a detail of 230 columns, " * 9 + "the end"
    row = {"backend": "plugin", "platform": "cpu", "usable": False, "detail": detail}
    info["backends"].append(row)
    _print_text(info)
    out = capsys.readouterr().out
    paths = set(info["paths"].values())  # a path is as long as it is
    lines = [x for x in out.splitlines() if not any(p in x for p in paths)]
    assert wide_lines("\n".join(lines)) == []
    plugin = out[out.index("  plugin ") :].splitlines()
    assert plugin[1].startswith(" " * 32) and plugin[1][32] != " "  # under the detail
    assert "the end" in out


def test_tune_report_lines_wrap_without_losing_the_machine_or_shape():
    from polykernel.cli.tune import _fit

    line = (
        "n=1000000: polykernel.catalog.scaled_add on cpu: numba(parallel=True) [exact] "
        "(tuned on Intel(R) Xeon(R) Processor x2 cores avx512, shape [1000000])"
    )
    wrapped = _fit(line)
    assert wide_lines(wrapped) == [] and len(wrapped.splitlines()) == 2
    assert " ".join(wrapped.split()) == line  # every word kept
    assert wrapped.splitlines()[1].startswith("    ")


def _measured(label: str, ratio: float, error: float):
    from polykernel.dispatch import Choice
    from polykernel.tuning.report import Measured

    return Measured(Choice.of(label), "ok", 1e-3 * ratio, 0.05, ratio=ratio,
                    ratio_error=error, rounds=30)  # fmt: skip


def test_a_tuning_ratio_known_within_100_percent_or_more_reads_noisy():
    from polykernel.dispatch import Key
    from polykernel.tuning.report import NOISY_NOTE, TunedCase, TuneReport

    key = Key("p", "cpu", "a very long device name " * 4, "x86", "f32[1]", (10,))
    case = TunedCase("n=1000 " + "with a long label " * 5, key, [[1000] * 8], "a")
    case.measured = [_measured("a", 1.0, 0.04), _measured("b", 1.3, 4.35)]
    case.measured[0].chosen = True
    text = TuneReport("p", [case]).table()
    assert "±4%" in text and "±435%" not in text and " noisy" in text
    assert " ".join(NOISY_NOTE.split()) in " ".join(text.split())
    assert wide_lines(text) == []
    assert "[1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000]" in " ".join(text.split())


def _long_decision():
    """A decision with an entry, a stale one and every field long (fakes)."""
    from types import SimpleNamespace as NS

    from polykernel.dispatch import Dispatch, Reason

    key = NS(device="Intel(R) Xeon(R) Processor, 2 cores " * 3, family="x86-avx512",
             signature="f32[1],f32[1];alpha:float " * 4, bucket=(20, 3))  # fmt: skip
    choice = NS(params=(("parallel", True),))
    measured = [NS(ok=True)] * 8
    entry = NS(key=key, recorded={"shape": [1000000, 8], "date": "2025-01-01"},
               source="/a/long/path/" * 6 + "tuned.json", measured=measured,
               best_of=lambda backend: choice)  # fmt: skip
    return Dispatch("polykernel.catalog.scaled_add", "cpu", "numba",
                    {"parallel": True, "block": 256}, Reason.EXACT, key, entry, 4,
                    ((entry, "its kernel changed: " + "numba 0.61 -> 0.62; " * 6),),
                    None, ("block",))  # fmt: skip


def test_a_decision_prints_in_one_short_line_and_details_on_request():
    decision = _long_decision()
    short = repr(decision)
    assert "\n" not in short and len(short) <= 100
    assert short == (
        "<Dispatch polykernel.catalog.scaled_add on cpu: numba(block=256, "
        "parallel=True) [exact]; .details()>"
    )
    assert repr([decision]) == f"[{short}]"  # what print(list) shows
    details = decision.details()
    assert wide_lines(details) == []
    flat = " ".join(details.split())
    assert "why: [exact] level 4 (tuned):" in flat
    assert "launch parameters: block=256 (given), parallel=True (tuned)" in flat
    assert "shape [1000000, 8], 2025-01-01" in flat and "8 candidates" in flat
    assert "stale entry (not used)" in flat
    assert decision.backend == "numba" and decision.reason == "exact"  # as before


def test_print_explain_dispatch_is_one_line_per_decision(capsys):
    import jax.numpy as jnp

    from polykernel import catalog, explain_dispatch

    x = jnp.ones(1000, jnp.float32)
    decisions = explain_dispatch(
        lambda a: catalog.scaled_add(catalog.scaled_add(a, a, alpha=2.0), a, alpha=1.0),
        x,
        platform="cpu",
    )
    assert isinstance(decisions, list) and len(decisions) == 2
    print(decisions)
    out = capsys.readouterr().out
    assert wide_lines(out) == [] and len(out) < 600
    assert out.splitlines()[-1] == "(each decision's .details(): why, in full)"
    assert out.startswith("polykernel.catalog.scaled_add on cpu: ")
    for decision in decisions:
        assert wide_lines(decision.details()) == []
