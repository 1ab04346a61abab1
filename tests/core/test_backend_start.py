"""Loading, registering and reviving kernels never start a JAX backend.

Libraries load their kernels at import; their users configure JAX afterwards
(``jax_num_cpu_devices``, ``jax.distributed.initialize``), which JAX refuses once a
backend has started. Each case runs in a new process (``backend_start_child.py``):
the loading action, a check that no backend started, then the user's configuration
and a run of what was loaded. The process is a child of the test process's ``jax``
zygote (``zygote.py``): NumPy, JAX and polykernel imported, as in a fresh one once
it imported them, and no backend started (the zygote refuses to fork if one was),
so a backend the child finds started was started by the loading action.
"""

from __future__ import annotations

import shutil
from importlib.util import find_spec
from pathlib import Path

import pytest
from subprocess_support import SUPPORT, last_json, run_python

CHILD = SUPPORT / "backend_start_child.py"


def _env(run_env: dict, cache: Path) -> dict:
    # Every child's: they differ only in the cache (POLYKERNEL_*, each child's own),
    # so one zygote serves them all, whatever XLA_FLAGS or JAX_PLATFORMS the run has.
    env = {
        **run_env,
        "POLYKERNEL_CACHE_DIR": str(cache),
        "JAX_PLATFORMS": "cpu",
        "POLYKERNEL_CUDA_ARCH": "90",
    }  # fmt: skip  (load_cuda_inline, no GPU here)
    env.pop("XLA_FLAGS", None)  # the child sets its device count itself
    return env


def _child(env: dict, *args: str | Path) -> dict:
    return last_json(run_python(CHILD, *args, env=env, timeout=240, forked=True))


def _check(report: dict) -> None:
    assert report["started_by_load"] is False, report
    assert report["devices"] == 2, report
    assert all(err == 0 for err in report["checks"].values()), report


@pytest.mark.slow
@pytest.mark.parametrize("case", ["load_cpp_inline", "load_cpp_inline_no_register"])
def test_loading_a_cpp_module_starts_no_backend(case, tmp_path, run_env):
    report = _child(_env(run_env, tmp_path / "cache"), case)
    _check(report)
    assert set(report["checks"]) == {"cpp"}


@pytest.mark.slow
def test_making_each_backends_kernel_starts_no_backend(tmp_path, run_env):
    report = _child(_env(run_env, tmp_path / "cache"), "constructors")
    _check(report)
    installed = [m for m in ("warp", "triton", "numba_cuda") if find_spec(m)]
    assert report["made"] == ["numba", "pallas", *installed]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_load_cuda_inline_starts_no_backend(tmp_path, run_env):
    report = _child(_env(run_env, tmp_path / "cache"), "load_cuda_inline")
    _check(report)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["load_exported", "register_exported_targets"])
def test_reviving_an_exported_program_starts_no_backend(case, tmp_path, run_env):
    env = _env(run_env, tmp_path / "cache")
    blob = tmp_path / "program.jaxexport"
    run_python(CHILD, "export", blob, env=env, timeout=240, forked=True)
    _check(_child(env, case, blob))
