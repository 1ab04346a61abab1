"""`make demo`'s main job runs, prints the comparison tables and writes its files."""

from __future__ import annotations

import json

import pytest
import zygote
from machine_support import gpus_jax_sees


@pytest.mark.slow
def test_demo_prints_tables_and_writes_json_and_png(tmp_path, run_env):
    out = tmp_path / "demo-output"
    # A child of the test process's zygote: as `python -m polykernel.demo` runs,
    # without paying JAX's and polykernel's imports again (Numba, Warp, SciPy and
    # matplotlib are imported in the child, their warnings on its stderr). Timed in
    # two processes: the child's own, then a fresh `python -m polykernel.demo` with
    # the same settings (the full demo: three).
    argv = ["-m", "polykernel.demo", "--quick", "--processes", "2"]
    argv += ["--output", str(out)]
    proc = zygote.run(argv, env=run_env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("scaled_add", "csrmv", "event_csrmv", "lif_step"):
        assert f"== polykernel.catalog.{name} ==" in proc.stdout
    assert "csrmv vs scipy.sparse on the same matrix" in proc.stdout
    assert "20000x10000,p=0.05 " in proc.stdout
    # Issue 29: the machine and the load first; every line fits in 100 columns; no
    # GPU warning on a CPU-only run.
    assert proc.stdout.lstrip().startswith("machine: ") and "\nload: " in proc.stdout
    assert f"wrote results.json, results.png and machine.json to\n  {out}\n" in (
        proc.stdout
    )
    lines = [line for line in proc.stdout.splitlines() if line != f"  {out}"]
    assert [line for line in lines if len(line) > 100] == []  # a path can be longer
    assert "Warp CUDA warning" not in proc.stderr
    # Issue 37: the headline is the ratio to jax_raw within the run; each table
    # names the launch parameters that ran, and the dispatch footer agrees with it.
    assert (
        "polykernel.catalog.scaled_add on cpu: speed-up vs jax_raw, same rounds "
        "(median ms per call)" in proc.stdout
    )
    table = proc.stdout[proc.stdout.index("== polykernel.catalog.scaled_add ==") :]
    table = table[: table.index("== polykernel.catalog.csrmv ==")]
    assert "launch parameters (tuned: " in table and "  numba: parallel=" in table
    footer = proc.stdout[proc.stdout.index("== dispatch: scaled_add") :]
    assert footer.count("column in the table above") == 2, footer
    assert footer.count("tuning it again here (not saved)") == 2, footer
    records = json.loads((out / "results.json").read_text())
    assert records
    numba = [r for r in records["records"] if r["backend"] == "numba"]
    sources = {r["primitive"]: r["launch_source"] for r in numba}
    assert sources["polykernel.catalog.scaled_add"] in ("tuned", "default")
    assert sources["polykernel.catalog.lif_step"] is None  # no launch parameters
    assert all(r["paired_base"] == "jax_raw" and r["paired_ratio"] for r in numba)
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    machine = json.loads((out / "machine.json").read_text())
    # The child had this process's JAX_PLATFORMS: it sees the GPUs JAX sees here.
    assert machine["gpus"] == gpus_jax_sees() and machine["cores"] >= 1
    assert records["machine"]["cpu"] == machine["cpu"]
    assert machine["load"] == records["load"] and records["load"]["seconds"] > 0
    # One progress total for the whole run, counted up to its end: a step per
    # record prepared, then one per case in each of its three passes (issue 37).
    steps = [line.split()[0] for line in proc.stderr.splitlines() if line[:1] == "["]
    cases = {(r["primitive"], r["platform"], r["label"]) for r in records["records"]}
    total = len(records["records"]) + 3 * len(cases)
    assert steps == [f"[{i}/{total}]" for i in range(1, total + 1)]
    assert proc.stderr.count("| pass 3/3\n") == len(cases)
    assert {r["passes"] for r in records["records"] if r["success"]} == {3}
    # Every number is the median of the two processes' (each timed 3 runs).
    assert "timing again in a fresh process: process 2 of 2\n" in proc.stderr
    timed = [r for r in records["records"] if r["success"]]
    assert {r["processes"] for r in timed} == {2}
    assert {r["n"] for r in timed} == {6}


def test_the_demo_refuses_a_count_of_processes_below_one(capsys):
    from polykernel.demo import main

    with pytest.raises(SystemExit):
        main(["--processes", "0"])
    assert "--processes: expected an integer >= 1, got '0'" in capsys.readouterr().err


def test_machine_info_names_the_machine_and_versions():
    from polykernel.demo import machine_info

    info = machine_info()
    assert set(info) == {"cpu", "cores", "os", "python", "versions", "gpus", "date"}
    assert info["cpu"] and info["os"] and info["python"].count(".") == 2
    assert set(info["versions"]) == {
        "polykernel",
        "jax",
        "jaxlib",
        "numpy",
        "numba",
        "scipy",
    }
    assert info["versions"]["jax"] and info["versions"]["numpy"]
    assert info["gpus"] == gpus_jax_sees()  # none under make test (cpu only)
    json.dumps(info)  # JSON-ready


def test_machine_info_names_the_gpus_jax_sees(monkeypatch):
    # A GPU machine simulated on the CPU: JAX sees one H200 (make test-gpu).
    import jax

    from polykernel.benchmark.machine import describe_machine
    from polykernel.demo import machine_info

    class H200:
        device_kind = "NVIDIA H200"

    cpu_devices = jax.devices
    monkeypatch.setattr(
        jax, "devices", lambda backend=None: (
            [H200()] if backend == "gpu" else cpu_devices(backend))
    )  # fmt: skip
    info = machine_info()
    assert info["gpus"] == gpus_jax_sees() == ["NVIDIA H200"]
    assert ", NVIDIA H200; polykernel " in describe_machine(info)


def _record(backend, label, params):
    from polykernel import BenchmarkRecord

    return BenchmarkRecord("cpu", backend, label, median_ms=1.0, primitive="p",
                           launch_params=params, launch_source="tuned")  # fmt: skip


def test_the_dispatch_footer_says_whether_the_table_ran_the_same_kernel():
    from types import SimpleNamespace as NS

    from polykernel.benchmark import BenchmarkResult
    from polykernel.demo import _as_in_table, _retuned

    table = BenchmarkResult([_record("numba", "n=1", {"parallel": True})])
    same = NS(backend="numba", params={"parallel": True})
    other = NS(backend="numba", params={"parallel": False})
    assert _as_in_table(table, "p", "n=1", same) == (
        ", as its numba column in the table above"
    )
    assert _as_in_table(table, "p", "n=1", other) == (
        "; the table's numba column ran (parallel=True)"
    )
    assert _as_in_table(table, "p", "n=2", same) == ""  # not in the table

    def measured(label, ratio):
        return NS(candidate=NS(label=label), status="ok", ratio=ratio)

    winner = measured("cuda_raw(grain=65536)", 1.0)
    case = NS(winner=winner, measured=[winner, measured("numba(parallel=True)", 1.2)])
    assert _retuned(case, "numba(parallel=True)") == (
        "tuning it again here (not saved): cuda_raw(grain=65536) wins; "
        "numba(parallel=True) takes 1.20x its time"
    )
    assert _retuned(case, "cuda_raw(grain=65536)").endswith("wins, the same pick")
