"""The scripts of ``benchmarks/`` stay runnable as the package moves underneath them.

They import polykernel's internals by path (a child process's code, a module to
time), which no other test exercises: each one must at least start (``--help``),
and the cold-build benchmark must run one round end to end.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: Every script with a command line (bench_native.py has none: it just runs).
SCRIPTS = sorted(
    p.name
    for p in BENCHMARKS.glob("*.py")
    if "argparse" in p.read_text() and not p.name.startswith("_")
)


def _run(run_env, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=BENCHMARKS, env=run_env,
                          capture_output=True, text=True, timeout=timeout)  # fmt: skip


def test_every_script_with_a_command_line_is_listed():
    assert {"bench_compile.py", "bench_tuning.py", "side_by_side.py"} <= set(SCRIPTS)


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_script_starts(run_env, script):
    done = _run(run_env, script, "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


@pytest.mark.slow
def test_the_cold_build_benchmark_runs_a_round(run_env):
    done = _run(run_env, "bench_compile.py", "--reps", "1", timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "warm handler (fingerprint..load)" in done.stdout


@pytest.mark.slow
def test_the_startup_benchmark_runs_a_round_and_separates_garbage_collection(run_env):
    done = _run(run_env, "bench_startup.py", "--reps", "1", "--backends", "cpp",
                timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    share = next(x for x in done.stdout.splitlines() if x.strip().startswith("cpp"))
    assert "ms without garbage collection; it ran" in done.stdout, done.stdout
    assert "processes started: none" in done.stdout  # the filled cache's row
    assert share.split()[1] in ("empty", "filled")
