"""Test-session environment: CPU JAX, a thread-safe Numba layer, private caches.

The variables are set before JAX or Numba is imported by any test module, and every
cache directory (matplotlib's included) and every temporary file (``TMPDIR``) lives
under one temporary directory this run owns, removed when the run's process exits.

``make test`` runs on the CPU only (``JAX_PLATFORMS=cpu``) and skips ``gpu`` tests.
``make test-gpu`` sets ``POLYKERNEL_TEST_GPU=1``: JAX may then use the GPU too
(``JAX_PLATFORMS=cpu,cuda``: CPU stays the default device, so every CPU test means
the same; GPU tests put their data on ``jax.devices("gpu")``), every ``gpu`` test
runs, and a run where JAX sees no GPU fails at start instead of skipping them.
"""

from __future__ import annotations

import atexit
import gc
import os
import runpy
import shutil
import stat
import sys
import tempfile
from pathlib import Path

# Helpers and child scripts (tests/support/) import as top-level modules, in this
# process and in the children that add the folder to their path.
sys.path.insert(0, str(Path(__file__).parent / "support"))
# Every Python process of the run collects cyclic garbage less often: the folder
# holding support/child_site/sitecustomize.py goes first on PYTHONPATH, for the
# pytest-xdist workers and every child started with the run's environment, and its
# settings apply to this process too (it started before the variable was set).
_CHILD_SITE = str(Path(__file__).parent / "support" / "child_site")
if _CHILD_SITE not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [_CHILD_SITE, os.environ.get("PYTHONPATH")])
    )
runpy.run_path(os.path.join(_CHILD_SITE, "sitecustomize.py"))

_RUN_DIR = tempfile.mkdtemp(prefix="polykernel-tests-")
os.chmod(_RUN_DIR, 0o700)
# Every temporary file of the run goes under it too, this process's and its
# children's (TMPDIR): a child a test kills (cache faults, distributed jobs) never
# runs its atexit cleanup, and would leave its private build folder
# (polykernel-native-*), a compiler's scratch file or a benchmark's run folder in
# the system's temp dir. pytest's own basetemp (tmp_path) follows.
_TMP = os.path.join(_RUN_DIR, "tmp")
os.mkdir(_TMP, 0o700)
os.environ["TMPDIR"] = tempfile.tempdir = _TMP
GPU_RUN = os.environ.get("POLYKERNEL_TEST_GPU") == "1"
os.environ["JAX_PLATFORMS"] = "cpu,cuda" if GPU_RUN else "cpu"
if GPU_RUN:
    # pytest-xdist workers share one GPU: none may take 75% of its memory up front.
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ["NUMBA_THREADING_LAYER"] = "omp"
# One polykernel cache for the whole run too, made by its first process as the JAX
# cache below: a kernel one pytest-xdist worker (or its child) built, another
# loads (the catalog's kernels were built once per worker; a full run on 2 cores:
# 662 -> 624 CPU-s). The cache is made for processes sharing it (atomic
# publication, per-entry build locks); a test that damages, clears, prunes or
# counts entries, or needs a cold build, uses a root of its own (tmp_path).
os.environ["POLYKERNEL_CACHE_DIR"] = os.environ.setdefault(
    "POLYKERNEL_TEST_CACHE", os.path.join(_RUN_DIR, "polykernel-cache")
)
os.environ["POLYKERNEL_CONFIG_DIR"] = os.path.join(_RUN_DIR, "polykernel-config")
os.environ["NUMBA_CACHE_DIR"] = os.path.join(_RUN_DIR, "numba-cache")
os.environ["WARP_CACHE_PATH"] = os.path.join(_RUN_DIR, "warp-cache")
os.environ["TRITON_CACHE_DIR"] = os.path.join(_RUN_DIR, "triton-cache")
os.environ["MPLCONFIGDIR"] = os.path.join(_RUN_DIR, "matplotlib")
# One JAX compilation cache for the whole run, every program kept (no minimum compile
# time or size): a program compiled again with the same HLO, by a parametrized
# test, another test file, the other pytest-xdist worker or a child process, loads
# its executable instead (a full run on 2 cores: 476 -> 438 s, ~1,100 hits in the
# workers alone). The first process of the run makes it (under xdist, the
# controller, before it starts the workers), the others inherit its path; it goes
# with that process's run directory. CPU runs only: GPU executables are not cached.
if not GPU_RUN:
    _JAX_CACHE = os.environ.setdefault(
        "POLYKERNEL_TEST_JAX_CACHE", os.path.join(_RUN_DIR, "jax-cache")
    )
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _JAX_CACHE
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    # JAX writes an entry in place: a process reading it while another writes it
    # gets a truncated entry, warns and compiles instead (a miss, never a wrong
    # executable: the entry is compressed, a truncated one does not decode). Child
    # processes ignore that warning as this process does (pyproject.toml).
    _IGNORE = "ignore:Error reading persistent compilation cache entry:UserWarning"
    if _IGNORE not in os.environ.get("PYTHONWARNINGS", ""):
        os.environ["PYTHONWARNINGS"] = ",".join(
            filter(None, [os.environ.get("PYTHONWARNINGS"), _IGNORE])
        )


_OWNER = os.getpid()


def _remove_run_dir() -> None:
    """Remove the run directory, read-only folders (cache tests make some) too;
    only in the process that made it (not in a forked child that exits)."""
    if os.getpid() != _OWNER:
        return

    def unlock(func, path, _exc) -> None:
        try:
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            os.chmod(path, stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                func(path)
        except OSError:
            pass

    if sys.version_info >= (3, 12):
        shutil.rmtree(_RUN_DIR, onexc=unlock)
    else:
        shutil.rmtree(_RUN_DIR, onerror=unlock)


atexit.register(_remove_run_dir)
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# Tests launch tiny grids on purpose; Numba's low-occupancy hint would be an error
# under filterwarnings=error (inside numba_cuda_callable's handler, too).
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import pytest  # noqa: E402


def pytest_report_header(config: pytest.Config) -> list[str]:
    import jax

    gpus = _gpu_devices()
    return [
        f"jax {jax.__version__}, run dir {_RUN_DIR}",
        f"JAX_PLATFORMS={os.environ['JAX_PLATFORMS']}, GPUs visible to JAX: "
        f"{len(gpus) if gpus else 'none (gpu tests are skipped)'}",
    ]


def pytest_sessionstart(session: pytest.Session) -> None:
    if GPU_RUN and not _gpu_devices():
        raise pytest.UsageError(
            "make test-gpu: JAX sees no GPU, so the gpu tests cannot run. Run it on a "
            "machine with an NVIDIA GPU and driver, with a CUDA-enabled jax "
            "(`make test-gpu` installs jax[cuda12]; set JAX_CUDA=cuda13 for CUDA 13)."
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection imported (JAX, NumPy, Numba, the test modules) lives as long
    # as the process: out of every later collection's traversal.
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    from suite_order import longest_first

    longest_first(items)
    # GPU launch tests run where JAX sees a GPU (make test-gpu); elsewhere they are
    # skipped, and their compile-only twins still run.
    if _gpu_devices():
        return
    skip_gpu = pytest.mark.skip(reason="needs a GPU visible to JAX (make test-gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


def _gpu_devices() -> list:
    if not GPU_RUN:
        return []  # JAX_PLATFORMS=cpu: no GPU can be visible
    import jax

    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


# -- the reliability suite's bad-input count (tests/reliability/) ------------------
# Here rather than in tests/reliability/conftest.py: under pytest-xdist only the
# controller prints the summary, and it loads this conftest but not the sub-folder's.
_bad_inputs = {"cases": 0, "failed": 0}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if "bad_input" not in report.keywords:
        return
    if report.when == "call":
        _bad_inputs["cases"] += 1
    if report.failed:
        _bad_inputs["failed"] += 1


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    if _bad_inputs["cases"] or _bad_inputs["failed"]:
        terminalreporter.write_line(
            f"reliability: {_bad_inputs['cases']} bad-input cases, "
            f"{_bad_inputs['failed']} failed"
        )


@pytest.fixture
def no_gpu(monkeypatch):
    """JAX as on a machine without a GPU, also under ``make test-gpu``: for tests of
    what such a machine shows (no GPU rows, no GPU architecture to build for, only
    the CPU checked). ``jax.devices`` answers a GPU platform as JAX_PLATFORMS=cpu
    does; every GPU query of polykernel asks it by platform."""
    import jax

    real = jax.devices

    def devices(backend=None):
        if backend is None or backend == "cpu":
            return real("cpu")
        raise RuntimeError(f"Unknown backend: '{backend}' requested (no_gpu fixture)")

    monkeypatch.setattr(jax, "devices", devices)


@pytest.fixture
def run_env() -> dict[str, str]:
    """Environment for subprocesses: the same private caches and settings."""
    return dict(os.environ)
