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
    records = json.loads((out / "results.json").read_text())
    assert records
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # One progress total for the whole run, counted up to its end.
    steps = [line.split()[0] for line in proc.stderr.splitlines() if line[:1] == "["]
    total = len(records["records"])
    assert steps == [f"[{i}/{total}]" for i in range(1, total + 1)]
