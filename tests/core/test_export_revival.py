"""Every backend's targets are revived in a new process, or refused naming what to do.

The children share the test run's private caches; none of the loading children
imports the kernels' code (unless a case says so). They are children of the test
process's ``jax`` zygote (``zygote.py``): new processes with NumPy, JAX and
polykernel imported and nothing since, as a fresh one is once it imported them (no
kernel code, no backend started). Warp's CPU handler comes back from the copy of
Warp's object file in polykernel's cache; the GPU launcher's kernels from their
images and launch spec; a ``numba_cuda_callable`` once the module defining its
function is imported (polykernel never imports user code). The CUDA program is
exported and registered here without a GPU; running it is a ``gpu`` test elsewhere.
"""

from __future__ import annotations

import pytest
from subprocess_support import SUPPORT, last_json, run_python

CHILD = SUPPORT / "revival_child.py"


def _child(*args: object, env: dict[str, str]) -> dict:
    return last_json(
        run_python(CHILD, *map(str, args), env=env, timeout=240, forked=True)
    )


@pytest.mark.slow
def test_a_warp_program_runs_in_a_process_that_never_defined_the_kernel(
    tmp_path, run_env
):
    pytest.importorskip("warp")
    exported = _child("warp", tmp_path, env=run_env)
    (target,) = [t for t in exported["targets"] if t.startswith("pk_warp_")]
    # Warp's own kernel cache of the new process is empty: only ours is used.
    env = {**run_env, "WARP_CACHE_PATH": str(tmp_path / "fresh-warp-cache")}
    loaded = _child("run", tmp_path, "warp", env=env)
    assert loaded.get("error") is None, loaded
    assert loaded["out"] == exported["out"] == [3.0 * i + 1 for i in range(8)]
    assert target in loaded["registered"]


@pytest.mark.slow
def test_without_the_cache_the_warp_target_is_refused_naming_it(tmp_path, run_env):
    pytest.importorskip("warp")
    _child("warp", tmp_path, env=run_env)
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(tmp_path / "empty-cache")}
    loaded = _child("run", tmp_path, "warp", env=env)
    assert loaded["error"] == "KernelNotAvailableError"
    assert "'pk_warp_" in loaded["message"] and "(warp)" in loaded["message"]


@pytest.mark.slow
def test_gpu_launcher_kernels_and_callables_are_revived_for_cuda(tmp_path, run_env):
    exported = _child("cuda", tmp_path, env=run_env)
    targets = set(exported["targets"])
    assert "polykernel_gpu_launch" in targets
    (callable_target,) = [t for t in targets if t.startswith("pk_ncc_")]
    # Every target the process registered is listed, CUDA ones included.
    assert {"polykernel_gpu_launch", callable_target} <= set(exported["registered"])
    (kernel,) = exported["kernels"]

    refused = _child("run", tmp_path, "cuda", env=run_env)
    assert refused["error"] == "KernelNotAvailableError"
    assert "numba_cuda_callable function 'add_one_twice' of module " in (
        refused["message"]
    )
    assert "Import 'revival_callables'" in refused["message"]

    loaded = _child("run", tmp_path, "cuda", "revival_callables", env=run_env)
    assert loaded.get("error") is None, loaded
    assert loaded["kernels"] == [kernel]  # from the cache, never compiled here
    assert {"polykernel_gpu_launch", callable_target} <= set(loaded["registered"])
