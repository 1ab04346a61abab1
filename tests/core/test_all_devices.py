"""Every platform's devices, not the default platform's: ``jax.devices()`` lists
only the default platform, so under ``JAX_PLATFORMS=cpu,cuda`` a GPU looked for
there is never found (found on an H200: Warp built for sm_80, ``check_kernel``
would not check the GPU, ``polykernel info`` said no GPU)."""

from __future__ import annotations

from types import SimpleNamespace

import jax

from polykernel import _jax_compat as jc
from polykernel.testing.runner import present_platforms


def _fake_devices(monkeypatch):
    cpu = jax.devices("cpu")[0]
    gpu = SimpleNamespace(platform="gpu", device_kind="NVIDIA H200",
                          compute_capability="9.0", id=0)  # fmt: skip
    real = jax.devices

    def devices(backend=None):
        if backend in (None, "cpu"):
            return real("cpu")  # the default platform is the CPU: cpu,cuda
        if backend == "gpu":
            return [gpu]
        raise RuntimeError(f"Unknown backend {backend}")

    monkeypatch.setattr(jax, "devices", devices)
    return cpu, gpu


def test_all_devices_lists_every_platform(monkeypatch):
    cpu, gpu = _fake_devices(monkeypatch)
    found = jc.all_devices()
    assert found[0] == cpu and found[-1] is gpu
    assert jax.devices() == jax.devices("cpu")  # what the old code looked at


def test_check_kernel_sees_the_gpu_when_the_cpu_is_the_default(monkeypatch):
    _, gpu = _fake_devices(monkeypatch)
    assert present_platforms()["gpu"] is gpu


def test_the_cpu_and_every_gpu_jax_has():
    try:  # none under make test's JAX_PLATFORMS=cpu; the card under make test-gpu
        gpus = {d.platform for d in jax.devices("gpu")}
    except RuntimeError:
        gpus = set()
    assert {d.platform for d in jc.all_devices()} == {"cpu"} | gpus
