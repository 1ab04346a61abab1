"""`make demo`'s main job runs, prints the comparison tables and writes its files."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_prints_tables_and_writes_json_and_png(tmp_path, run_env):
    out = tmp_path / "demo-output"
    proc = subprocess.run(
        [sys.executable, "-m", "polykernel.demo", "--quick", "--output", str(out)],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
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
    records = json.loads((out / "results.json").read_text())
    assert records
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    machine = json.loads((out / "machine.json").read_text())
    assert machine["gpus"] == [] and machine["cores"] >= 1
    assert records["machine"]["cpu"] == machine["cpu"]
    assert machine["load"] == records["load"] and records["load"]["seconds"] > 0
    # One progress total for the whole run, counted up to its end.
    steps = [line.split()[0] for line in proc.stderr.splitlines() if line[:1] == "["]
    total = len(records["records"])
    assert steps == [f"[{i}/{total}]" for i in range(1, total + 1)]


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
    assert info["gpus"] == []  # the suite runs with JAX_PLATFORMS=cpu
    json.dumps(info)  # JSON-ready
