"""The architecture a Warp GPU kernel is built for: the pinned one, else the GPU's,
asked for by platform (never a guess). On an H200 under ``JAX_PLATFORMS=cpu,cuda``
it was built for sm_80 (``jax.devices()`` held only the CPU), and the launch failed
with CUDA_ERROR_UNSUPPORTED_PTX_VERSION."""

from __future__ import annotations

from types import SimpleNamespace

import jax
import pytest

from polykernel.backends.warp.gpu_target import _device_arch
from polykernel.errors import GpuArchDetectionError


def test_the_environment_pins_the_arch(monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CUDA_ARCH", "90")
    assert _device_arch() == "90"


def test_the_gpu_is_found_when_the_cpu_is_the_default_platform(monkeypatch):
    monkeypatch.delenv("POLYKERNEL_CUDA_ARCH", raising=False)
    real = jax.devices
    h200 = SimpleNamespace(platform="gpu", compute_capability="9.0")

    def devices(backend=None):
        return [h200] if backend == "gpu" else real("cpu")

    monkeypatch.setattr(jax, "devices", devices)
    assert _device_arch() == "90"


def test_no_gpu_and_no_arch_is_an_error_not_a_guess(monkeypatch, no_gpu):
    monkeypatch.delenv("POLYKERNEL_CUDA_ARCH", raising=False)
    from polykernel.native import toolchain

    monkeypatch.setattr(toolchain, "_detect_gpu_arches", lambda: ())
    with pytest.raises(GpuArchDetectionError, match="no CUDA GPU is visible"):
        _device_arch()
