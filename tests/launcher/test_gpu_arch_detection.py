"""The GPU architectures kernels are compiled for, when nothing pins them: JAX's GPUs
once JAX has started its backends (no process), else ``nvidia-smi``'s.

A warm H200 process spent ~20 ms starting ``nvidia-smi`` to learn what JAX already
knew. JAX is asked by platform (``jax.devices("gpu")``: ``jax.devices()`` lists only
the default platform's devices) and never made to start a backend; ``nvidia-smi``
stays the fallback (no JAX, no backend yet, or no GPU platform in JAX).
"""

from __future__ import annotations

import subprocess
import textwrap
from types import SimpleNamespace

import jax
import pytest
from subprocess_support import last_json, run_python

import polykernel._jax_compat as jax_compat
from polykernel.native import toolchain


@pytest.fixture
def detect(monkeypatch):
    """``_detect_gpu_arches`` uncached, with every process start refused."""

    def no_process(*args, **kw):
        raise AssertionError(f"a process was started: {args[0]!r}")

    monkeypatch.setattr(subprocess, "run", no_process)
    toolchain._detect_gpu_arches.cache_clear()
    yield toolchain._detect_gpu_arches
    toolchain._detect_gpu_arches.cache_clear()


def _gpus(monkeypatch, *caps: str) -> None:
    real = jax.devices

    def devices(backend=None):
        if backend == "gpu":
            return [SimpleNamespace(platform="gpu", compute_capability=c) for c in caps]
        return real("cpu")  # the default platform: no GPU there

    monkeypatch.setattr(jax, "devices", devices)


def test_jax_gpus_are_asked_by_platform_without_a_process(detect, monkeypatch):
    jax.devices("cpu")  # the backends have started
    _gpus(monkeypatch, "9.0", "8.0", "9.0")
    assert detect() == ("80", "90")


def test_a_backend_that_has_not_started_is_not_started(detect, monkeypatch):
    monkeypatch.setattr(jax_compat, "backends_initialised", lambda: False)

    def refuse(backend=None):
        raise AssertionError("jax.devices would start JAX's backends")

    monkeypatch.setattr(jax, "devices", refuse)
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)  # no nvidia-smi
    assert detect() == ()


def test_nvidia_smi_remains_the_fallback(monkeypatch):
    jax.devices("cpu")
    _gpus(monkeypatch)  # JAX has no GPU
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: "/bin/nvidia-smi")
    monkeypatch.setattr(toolchain, "_run", lambda cmd: "9.0\n8.6\n")
    toolchain._detect_gpu_arches.cache_clear()
    try:
        assert toolchain._detect_gpu_arches() == ("86", "90")
    finally:
        toolchain._detect_gpu_arches.cache_clear()


def test_capabilities_jax_cannot_number_fall_back(detect, monkeypatch):
    jax.devices("cpu")
    _gpus(monkeypatch, "gfx90a")  # not CUDA's numbering
    monkeypatch.setattr(toolchain.shutil, "which", lambda name: None)
    assert detect() == ()


def test_a_fresh_process_starts_no_backend(run_env):
    code = textwrap.dedent(
        """
        import json
        from polykernel._jax_compat import backends_initialised
        from polykernel.native import toolchain
        found = toolchain._detect_gpu_arches()
        print(json.dumps([list(found), backends_initialised()]))
        """
    )
    env = {**run_env, "PATH": "/nonexistent"}  # no nvidia-smi either
    assert last_json(run_python(code=code, env=env)) == [[], False]
