"""The `polykernel` command, always run as a subprocess (exit codes, stdout/stderr)."""

from __future__ import annotations

import csv
import json
import os
import textwrap
from pathlib import Path

import pytest
import zygote

PRIMS = textwrap.dedent(
    """
    import jax
    import numpy as np
    import polykernel as pk
    from polykernel.benchmark import BenchmarkConfig

    def make(name, offset, tags):
        op = pk.XLACustomKernel(name)
        op.def_jax_raw_kernel(lambda outs, **kw: (lambda x: [x * 2.0]), platform="cpu")
        op.def_kernel("numba", "cpu", lambda outs, **kw: (lambda x: [x * 2.0 + offset]))
        def call(x, *, backend=None):
            return op(x, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)],
                      backend=backend)[0]
        op.def_call(call)
        op.def_benchmark_data(lambda *, platform: [
            BenchmarkConfig("n=16", (np.ones(16, np.float32),), work=(128, "B"))])
        op.def_tags(*tags)
        return op

    good = make("clitest.good", 0.0, ("dense", "float"))
    bad = make("clitest.bad", 1.0, ("dense", "broken"))
    plain = pk.XLACustomKernel("clitest.nodata")
    """
)


@pytest.fixture
def env(run_env, tmp_path):
    (tmp_path / "cli_prims.py").write_text(PRIMS)
    return run_env | {
        "POLYKERNEL_CONFIG_DIR": str(tmp_path / "cfg"),
        "POLYKERNEL_CACHE_DIR": str(tmp_path / "cache"),
        # Kept, not replaced: `make test-gpu` may run polykernel from src/ this way.
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(tmp_path), run_env.get("PYTHONPATH")) if p
        ),
    }


def pk(env, *args, cwd=None):
    # A child of the test process's zygote: as `python -m polykernel.cli` would run.
    return zygote.run(["-m", "polykernel.cli", *args], env=env, cwd=cwd, timeout=120)


def benchmark(env, *args):
    """``polykernel benchmark`` of the primitives of ``cli_prims`` only."""
    return pk(env, "benchmark", "--no-catalog", "-m", "cli_prims", *args)


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_info_text_and_json(env):
    import jax.ffi

    env = env | {"JAX_PLATFORMS": "cpu"}  # a CPU-only machine, also under test-gpu

    header = Path(jax.ffi.include_dir()) / "xla" / "ffi" / "api" / "c_api.h"
    text = header.read_text()
    major = text.split("#define XLA_FFI_API_MAJOR ")[1].split()[0]
    minor = text.split("#define XLA_FFI_API_MINOR ")[1].split()[0]
    out = pk(env, "info")
    assert out.returncode == 0, out.stderr
    assert f"FFI API        {major}.{minor}" in out.stdout
    assert "jax_raw" in out.stdout and "cuda_raw" in out.stdout
    data = json.loads(pk(env, "info", "--json").stdout)
    assert data["jax"]["ffi_api_version"] == f"{major}.{minor}"
    assert data["jax"]["default_platform"] == "cpu" and data["gpu_present"] is False
    rows = {(r["backend"], r["platform"]): r for r in data["backends"]}
    assert rows[("jax_raw", "cpu/gpu/tpu")]["usable"] is True
    assert (
        rows[("warp", "gpu")]["usable"] is False
    )  # no GPU here, whatever is installed
    assert set(data["versions"]) == {"polykernel", "python", "jax", "jaxlib", "numpy"}


@pytest.mark.gpu
def test_info_names_the_gpu_when_the_cpu_is_the_default(env):
    out = pk(env | {"JAX_PLATFORMS": "cpu,cuda"}, "info", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["jax"]["default_platform"] == "cpu" and data["gpu_present"] is True
    rows = {(r["backend"], r["platform"]): r for r in data["backends"]}
    assert rows[("cuda_raw", "gpu")]["usable"] is True, rows[("cuda_raw", "gpu")]


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_list_with_tags_and_names(env):
    out = pk(env, "list", "--no-catalog", "-m", "cli_prims", "--tags", "dense,float")
    assert out.returncode == 0, out.stderr
    assert "clitest.good  [tags: dense,float]" in out.stdout
    assert "cpu: jax_raw, numba (default jax_raw)" in out.stdout
    assert "clitest.bad" not in out.stdout
    rows = json.loads(
        pk(env, "list", "--no-catalog", "-m", "cli_prims", "--json").stdout
    )
    by = {r["name"]: r for r in rows}
    assert by["clitest.nodata"]["benchmarkable"] is False
    assert by["clitest.good"]["backends"] == {"cpu": ["jax_raw", "numba"]}
    miss = pk(env, "list", "--no-catalog", "-m", "cli_prims", "clitest.god")
    assert miss.returncode == 2  # an unknown NAME is a usage error
    assert "Did you mean: clitest.good, " in miss.stderr  # closest first
    assert len(miss.stderr.strip().splitlines()) == 1 and "Traceback" not in miss.stderr


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_benchmark_outputs_files_and_defaults(env, tmp_path):
    # --target-spread 0: exactly the 3 runs in each process, no adaptive warm-up;
    # this test is about the files, the progress and the defaults, not the times.
    out = benchmark(
        env, "--tags", "float", "--n-warmup", "1", "--n-runs", "3",
        "--target-spread", "0",
        "--output", str(tmp_path / "r.csv"), "--plot", str(tmp_path / "r.png"),
        "--save-defaults",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "clitest.good on cpu: median ms per call" in out.stdout
    assert "1 primitive, 2 runs, 0 failed, 0 mismatched" in out.stdout
    assert "[1/4] clitest.good | n=16 | jax_raw" in out.stderr  # plain progress lines
    # Issue 37: two passes over the run by default (at most --n-runs).
    assert "[3/4] clitest.good | n=16 | pass 1/2" in out.stderr
    assert "[4/4] clitest.good | n=16 | pass 2/2" in out.stderr
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert "clitest.good" in (tmp_path / "r.csv").read_text()
    # ... and with --output, in a fresh process too, the records joined.
    assert "timing again in a fresh process: process 2 of 2" in out.stderr
    with open(tmp_path / "r.csv", newline="") as f:
        assert {row["processes"] for row in csv.DictReader(f)} == {"2"}
    saved = json.loads((tmp_path / "cfg" / "tuned.json").read_text())
    (entry,) = saved["entries"]["clitest.good"]
    assert entry["scope"] == "saved_default" and entry["bucket"] is None
    backend = entry["winner"]["backend"]
    assert f"default clitest.good: cpu={backend}" in out.stdout
    assert not (tmp_path / "cfg" / "defaults.json").exists()

    shown = pk(env, "defaults", "show", "clitest.good")
    assert shown.returncode == 0, shown.stderr
    assert f"cpu any shape (saved default): {backend}" in shown.stdout
    assert "an alias of `polykernel tune --show`" in shown.stderr
    cleared = pk(env, "defaults", "clear", "clitest.good", "clitest.other")
    assert cleared.returncode == 0
    assert "cleared 1 primitive: clitest.good" in cleared.stdout
    assert pk(env, "defaults", "show").stdout.rstrip().endswith("0 entries")
    assert pk(env, "defaults", "clear").returncode == 0


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_benchmark_mismatch_reported_and_strict_fails(env):
    # --target-spread 0: exactly the 2 runs; outputs are compared before the timing.
    args = ["--tags", "broken", "--n-warmup", "0", "--n-runs", "2",
            "--target-spread", "0", "--no-progress"]  # fmt: skip
    loose = benchmark(env, *args)
    assert loose.returncode == 0, loose.stderr
    assert "MISMATCH clitest.bad [cpu] n=16: numba vs jax_raw" in loose.stdout
    assert "1 mismatched" in loose.stdout and "[1/" not in loose.stderr
    strict = benchmark(env, *args, "--strict")
    assert strict.returncode == 1
    assert strict.stderr.strip() == (
        "polykernel benchmark: error: --strict: 0 failed runs, 1 output mismatch"
    )


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_benchmark_progress_counts_against_the_whole_run(env):
    # --target-spread 0: exactly the 2 runs; the steps counted do not depend on it.
    out = benchmark(env, "--n-warmup", "0", "--n-runs", "2", "--target-spread", "0")
    assert out.returncode == 0, out.stderr
    steps = [line.split()[0] for line in out.stderr.splitlines() if line[:1] == "["]
    # Two benchmarkable primitives x one config x two backends, then the two
    # cases in each of two passes: one total of 8.
    assert steps == [f"[{i}/8]" for i in range(1, 9)]
    assert (
        "skipping clitest.nodata (needs def_call and def_benchmark_data)" in out.stderr
    )
    assert "2 primitives, 4 runs" in out.stdout


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_benchmark_without_primitives_and_bad_module(env):
    none = pk(env, "benchmark", "--no-catalog")
    assert none.returncode == 1
    assert none.stderr.startswith(
        "polykernel benchmark: error: no registered primitive can be benchmarked on cpu"
    )
    assert len(none.stderr.strip().splitlines()) == 1
    bad = pk(env, "list", "--no-catalog", "-m", "no_such_module_xyz")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert (
        "cannot import module 'no_such_module_xyz' (ModuleNotFoundError" in bad.stderr
    )
    debug = pk(env, "--debug", "list", "--no-catalog", "-m", "no_such_module_xyz")
    assert debug.returncode == 2 and "Traceback" in debug.stderr
    missing = pk(env, "list", "--no-catalog", "-m", "nope/prims.py")
    assert missing.returncode == 2 and "no such file: nope/prims.py" in missing.stderr


def test_catalog_is_imported_by_default(env):
    out = pk(env, "list", "--json")
    assert out.returncode == 0, out.stderr
    names = [row["name"] for row in json.loads(out.stdout)]
    assert names and all(n.startswith("polykernel.catalog.") for n in names)


def test_module_given_as_file_path(env, tmp_path):
    out = pk(env, "list", "--no-catalog", "-m", str(tmp_path / "cli_prims.py"))
    assert out.returncode == 0, out.stderr
    assert "clitest.good" in out.stdout


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_usage_errors_exit_2(env):
    for args in (
        [],
        ["benchmark", "--n-runs", "0"],
        ["benchmark", "--output", "r.pkl"],
        ["benchmark", "--plot", "r.svg"],
        ["cache", "prune"],
        ["cache", "explode"],
        ["nosuchcommand"],
    ):
        out = pk(env, *args)
        assert out.returncode == 2, (args, out.stderr)
        assert "usage: polykernel" in out.stderr


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_cache_info_prune_clear(env, tmp_path):
    entry = tmp_path / "cache" / "native" / "abc"
    entry.mkdir(parents=True, mode=0o700)
    (entry / "lib.so").write_bytes(b"x" * 3000)
    info = pk(env, "cache", "info")
    assert info.returncode == 0, info.stderr
    assert f"cache root   {tmp_path / 'cache'}" in info.stdout
    assert "2.9 KiB in 1 file" in info.stdout
    assert "native libs  1 entry" in info.stdout
    kept = pk(env, "cache", "prune", "--max-bytes", "100000")
    assert kept.returncode == 0 and "pruned 0 B" in kept.stdout
    cleared = pk(env, "cache", "clear")
    assert cleared.returncode == 0 and "cleared 2.9 KiB" in cleared.stdout
    assert not (tmp_path / "cache" / "native").exists()
    assert "0 B in 0 files" in pk(env, "cache", "info").stdout


def test_main_in_process_handles_absent_catalog(monkeypatch, capsys):
    """`main` returns codes instead of exiting; a missing catalog is skipped."""
    from polykernel import cli
    from polykernel.cli import selection

    monkeypatch.setattr(selection, "CATALOG", "polykernel._no_catalog_here")
    selection.import_modules([], catalog=True)  # nothing to import, no error
    assert cli.main(["--version"]) == 0
    assert cli.main(["benchmark", "--n-runs", "x"]) == 2
    assert "expected an integer >= 1, got 'x'" in capsys.readouterr().err


def test_a_fresh_process_that_writes_no_records_is_an_error(capsys):
    # A real second process, given a command line it refuses (exit 2, at once):
    # this process's records stand alone, and the error says what the other said.
    import argparse

    from polykernel.benchmark import BenchmarkRecord, BenchmarkResult
    from polykernel.cli.processes import in_processes

    mine = BenchmarkResult([BenchmarkRecord("cpu", "numba", "n=8", median_ms=1.0)])
    args = argparse.Namespace(argv=["benchmark", "--no-such-flag"], processes=2)
    joined, errors = in_processes(mine, args)
    assert [(r.backend, r.median_ms, r.processes) for r in joined] == [
        ("numba", 1.0, 1)
    ]
    (error,) = errors
    assert error.startswith("process 2 of 2 wrote no records (exit 2): ")
    assert "unrecognized arguments: --no-such-flag" in error
    assert capsys.readouterr().err == (
        "timing again in a fresh process: process 2 of 2\n"
    )


def test_a_fresh_process_that_hangs_is_stopped_and_reported(
    tmp_path, monkeypatch, capsys
):
    # Never a hang: a fresh process that does not finish in time is stopped.
    import argparse

    from polykernel.benchmark import BenchmarkRecord, BenchmarkResult
    from polykernel.cli import processes

    (tmp_path / "sleepy_prims.py").write_text("import time\ntime.sleep(60)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(processes, "MIN_TIME_LIMIT_S", 2.0)
    mine = BenchmarkResult([BenchmarkRecord("cpu", "numba", "n=8", median_ms=1.0)])
    argv = ["benchmark", "--no-catalog", "-m", "sleepy_prims"]
    args = argparse.Namespace(argv=argv, processes=2)
    joined, errors = processes.in_processes(mine, args)
    assert len(joined) == 1
    assert errors == [
        "process 2 of 2 did not finish within 2 s (this process's run took 0 s) "
        "and was stopped"
    ]
    assert processes.time_limit(mine) == 2.0
    mine.environment = {"load": {"seconds": 100.0}}
    assert processes.time_limit(mine) == 500.0  # five times this process's run


def test_more_passes_than_runs_is_a_usage_error(capsys):
    from polykernel import cli

    args = ["benchmark", "--no-catalog", "--n-runs", "2", "--passes", "3"]
    assert cli.main(args) == 2
    assert capsys.readouterr().err == (
        "polykernel benchmark: error: --passes 3: at most --n-runs (2), as each "
        "pass times a share of the runs; give fewer passes or more runs\n"
    )
    assert cli.main(["benchmark", "--passes", "0"]) == 2
    assert "--passes: expected an integer >= 1, got '0'" in capsys.readouterr().err


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_a_module_that_fails_while_importing_is_a_runtime_error(env, tmp_path):
    # It exists (not a usage error, unlike a missing module or NAME): exit code 1.
    (tmp_path / "broken_prims.py").write_text("raise RuntimeError('boom in setup')\n")
    out = pk(env, "list", "--no-catalog", "-m", "broken_prims")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "cannot import module 'broken_prims' (RuntimeError: boom in setup)" in (
        out.stderr
    )
    inner = tmp_path / "inner_missing.py"
    inner.write_text("import no_such_dependency_xyz\n")
    dep = pk(env, "list", "--no-catalog", "-m", "inner_missing")
    assert dep.returncode == 1  # the module exists; what it imports does not
    assert "No module named 'no_such_dependency_xyz'" in dep.stderr


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_python_dash_m_polykernel_is_the_command(run_env):
    from polykernel import __version__

    # A child of the test process's zygote: as `python -m polykernel` runs
    # (runpy runs the package's __main__ either way).
    proc = zygote.run(["-m", "polykernel", "--version"], env=run_env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == __version__


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target-spread", "-0.1"], "expected a fraction of the median >= 0 such as"),
        (["--target-spread", "tight"], "got 'tight'"),
        (["--time-budget", "-1"], "expected seconds >= 0, got '-1'"),
        (["--time-budget", "inf"], "expected seconds >= 0, got 'inf'"),
    ],
)
def test_spread_and_budget_options_are_checked(capsys, args, message):
    from polykernel import cli

    assert cli.main(["benchmark", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_benchmark_prints_the_machine_the_load_and_noisy_times_in_words(env):
    # A bound no timing can meet on a one-run window: every time is noisy, and the
    # table says so in words; the budget 0 keeps the run short.
    out = benchmark(env, "--tags", "float", "--n-warmup", "0", "--n-runs", "4",
                    "--target-spread", "0.000001", "--time-budget", "0",
                    "--no-progress")  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("machine: ") and "logical CPU" in lines[0]
    assert any(line.startswith("load: 1-min load average ") for line in lines)
    assert "! noisy (IQR > 0% of median)" in out.stdout
    assert "NOISY clitest.good [cpu] n=16:" in out.stdout
    assert "(bound 0%) over 4 of 4 runs in 2 passes" in " ".join(out.stdout.split())
    assert all(len(line) <= 100 for line in lines)
