"""``polykernel cache warm --jobs N``: independent kernels build at the same time.

A module of four primitives, each with its own C++ (``cuda_raw``) kernel, is warmed
by the real command in a fresh process whose compiler is a wrapper logging when each
compile starts and ends (and sleeping, so overlap is unmistakable). With ``--jobs 4``
the compiles overlap; with ``--jobs 1`` they do not; the output is the same either
way (target order); a kernel that fails to build is reported in its place and the
others are built.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest
import zygote

from polykernel.cli.warm import default_jobs

PRIMS = textwrap.dedent(
    """
    import jax
    import numpy as np
    import polykernel as pk
    from polykernel.benchmark import BenchmarkConfig

    SRC = '''
    void add_{k}(const pk::Tensor& x, pk::Tensor& y) {
      const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
      for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] + {k};
    }'''

    def make(k, source):
        name = "{uid}_add" + str(k)
        op = pk.XLACustomKernel("{uid}.add" + str(k))

        def generator(outs, **kw):
            mod = pk.load_cpp_inline(name, source.replace("{k}", str(k)),
                                     ["add_" + str(k)])
            fn = getattr(mod, "add_" + str(k))
            return lambda x: fn(x, outs=outs[0])

        op.def_cuda_raw_kernel(generator, platform="cpu")

        def call(x, *, backend=None):
            return op(x, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)],
                      backend=backend)[0]

        op.def_call(call)
        op.def_benchmark_data(lambda *, platform: [
            BenchmarkConfig("n=4", (np.ones(4, np.float32),))])
        return op

    ops = [make(k, SRC) for k in range(1, 4)]
    broken = make(4, SRC.replace("b[i] =", "b[i] = undeclared_name +"))
    """
)


@pytest.fixture
def prims(tmp_path):
    uid = f"w{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{uid}_prims.py"
    path.write_text(PRIMS.replace("{uid}", uid))
    log = tmp_path / "cxx.log"
    cxx = tmp_path / "slow-g++"
    cxx.write_text(
        "#!/bin/sh\n"
        'case "$*" in *-shared*) ;; *) exec g++ "$@";; esac\n'  # probes: as they are
        f'echo "start $(date +%s.%N)" >> {log}\n'
        "sleep 0.5\n"
        'g++ "$@"; rc=$?\n'
        f'echo "end $(date +%s.%N)" >> {log}\n'
        "exit $rc\n"
    )
    cxx.chmod(0o755)
    return {"path": path, "uid": uid, "log": log, "cxx": cxx, "dir": tmp_path}


def _warm(prims, run_env, jobs: int, cache: str) -> subprocess.CompletedProcess:
    env = {**run_env, "CXX": str(prims["cxx"]),
           "POLYKERNEL_CACHE_DIR": str(prims["dir"] / cache)}  # fmt: skip
    prims["log"].unlink(missing_ok=True)
    # Forked by the zygote: a process of its own, as `polykernel cache warm` runs.
    return zygote.run(
        ["-m", "polykernel.cli", "cache", "warm", "--platform", "cpu",
         "--jobs", str(jobs), str(prims["path"])],
        env=env, cwd=prims["dir"], timeout=600,
    )  # fmt: skip


def _intervals(log: Path) -> list[tuple[float, float]]:
    """(start, end) of each compile, in start order (ends matched in order: an
    interval's exact end does not matter, only whether any two overlap)."""
    starts, ends = [], []
    for line in log.read_text().split("\n"):
        if line:
            kind, at = line.split()
            (starts if kind == "start" else ends).append(float(at))
    assert len(starts) == len(ends) == 4, log.read_text()
    return list(zip(sorted(starts), sorted(ends), strict=True))


def _overlap(intervals: list[tuple[float, float]]) -> bool:
    return any(b[0] < a[1] for a, b in itertools.pairwise(intervals))


def _lines(out: str) -> list[str]:
    # The per-target time and the cache's folder vary; everything else must not.
    out = re.sub(r"cache-(parallel|serial)", "CACHE", out)
    return [re.sub(r"\(\d+\.\d s\)", "(T s)", line) for line in out.splitlines()]


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_kernels_build_at_once_with_the_same_output_and_errors_per_kernel(
    prims, run_env
):
    parallel = _warm(prims, run_env, 4, "cache-parallel")
    assert parallel.returncode == 1, parallel.stderr
    assert _overlap(_intervals(prims["log"])), prims["log"].read_text()
    serial = _warm(prims, run_env, 1, "cache-serial")
    assert serial.returncode == 1, serial.stderr
    assert not _overlap(_intervals(prims["log"])), prims["log"].read_text()

    uid = prims["uid"]
    lines = _lines(parallel.stdout)
    assert lines == _lines(serial.stdout)
    assert lines[:3] == [f"{uid}.add{k} cuda_raw n=4: ready" for k in range(1, 4)]
    assert lines[3].startswith(f"{uid}.add4 cuda_raw n=4: FAILED (")
    assert "undeclared_name" in lines[3]
    assert lines[4] == f"{prims['path']}: 4 primitives (T s)"
    errors = parallel.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith(
        f"polykernel cache warm: error: {uid}.add4 cuda_raw n=4: "
    ), parallel.stderr
    assert _lines(parallel.stderr) == _lines(serial.stderr)


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_a_warm_cache_runs_no_compiler(prims, run_env):
    assert _warm(prims, run_env, 2, "cache-again").returncode == 1
    again = _warm(prims, run_env, 2, "cache-again")
    assert again.returncode == 1
    # Only the broken kernel is compiled again (failures are not cached).
    assert len(prims["log"].read_text().split("start")) - 1 == 1


def test_jobs_default_and_bad_values(prims, run_env):
    assert default_jobs() == len(os.sched_getaffinity(0))
    out = _warm(prims, run_env, 0, "cache-bad")
    assert out.returncode == 2
    assert "argument -j/--jobs: expected an integer >= 1, got '0'" in out.stderr
