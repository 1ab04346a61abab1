"""The scripts of ``benchmarks/`` stay runnable as the package moves underneath them.

They import polykernel's internals by path (a child process's code, a module to
time), which no other test exercises: each one must at least start (``--help``),
and the cold-build benchmark must run one round end to end.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import zygote

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


def test_every_benchmark_run_directory_is_removed_when_its_process_exits(
    run_env, tmp_path
):
    # The scripts keep their caches in a run directory of their own
    # (_env.run_directory): gone at exit, by an exception too, but not in a child
    # the run forked (it is still the parent's).
    code = (
        "import os, sys, _env\n"
        "path = _env.run_directory('pk-test-run-')\n"
        "open(os.path.join(path, 'f'), 'w').close()\n"
        "if os.fork() == 0: os._exit(0)\n"
        "os.wait(); print(path, os.path.isfile(os.path.join(path, 'f')), flush=True)\n"
        "if sys.argv[1] == 'raise': raise SystemExit(3)\n"
    )
    for how, code_expected in (("exit", 0), ("raise", 3)):
        env = run_env | {"TMPDIR": str(tmp_path)}
        done = _run(env, "-c", code, how)
        assert done.returncode == code_expected, done.stderr[-2000:]
        path, present = done.stdout.split()
        assert present == "True" and Path(path).parent == tmp_path
        assert not Path(path).exists()
    uses = [
        p.name
        for p in BENCHMARKS.glob("*.py")
        if p.name != "_env.py" and re.search(r"mkdtemp\((?![^)]*\bdir=)", p.read_text())
    ]  # a folder inside the run directory goes with it
    assert uses == [], f"use _env.run_directory, which removes it at exit: {uses}"


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_script_starts(run_env, script):
    # A child of the test process's zygote: as `python SCRIPT --help` runs.
    done = zygote.run([script, "--help"], env=run_env, cwd=BENCHMARKS, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


@pytest.mark.slow
def test_the_cold_build_benchmark_runs_a_round(run_env):
    done = _run(run_env, "bench_compile.py", "--reps", "1", "--kernels", "add",
                timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "add: warm handler (fingerprint..load)" in done.stdout
    assert "add: cold, the runtime library built" in done.stdout
    assert "csrmv" not in done.stdout  # only the kernel asked for


@pytest.mark.slow
def test_the_startup_benchmark_runs_a_round_and_separates_garbage_collection(run_env):
    done = _run(run_env, "bench_startup.py", "--reps", "1", "--backends", "cpp",
                timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    share = next(x for x in done.stdout.splitlines() if x.strip().startswith("cpp"))
    assert "ms without garbage collection)" in done.stdout, done.stdout
    assert "the collector ran" in done.stdout, done.stdout
    assert "processes started: none" in done.stdout  # the filled cache's row
    kept = re.findall(r"objects kept by the first result: (\d+) \(baseline (\d+)\)",
                      done.stdout)  # fmt: skip
    assert len(kept) == 2 and all(int(b) > 0 for _, b in kept), done.stdout
    assert share.split()[1] in ("empty", "filled")
