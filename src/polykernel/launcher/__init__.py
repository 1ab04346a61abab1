"""One native launcher for compiled GPU kernels (Numba-CUDA, Triton, Warp, ...).

- :mod:`.layout`: the parameter layout and launch spec (pure, unit-tested);
- :mod:`.batching`: what a call launches under ``jax.vmap`` (pure);
- :mod:`.build`: build and load ``launcher/csrc/gpu_launcher.cc`` and its
  headers in ``launcher/csrc/gpu_launcher/`` (cached);
- :mod:`.kernels`: :func:`register_gpu_kernel`, content-derived kernel ids.

See ``docs/gpu.md``. Importing this package imports neither JAX nor any GPU package
and touches no disk; the launcher is built on first registration.
"""

from __future__ import annotations

from .batching import BatchPlan, plan_batch
from .build import LauncherLibrary, build_launcher, launcher_library
from .kernels import (
    GRAPH_TARGET,
    NOGRAPH_TARGET,
    GpuKernel,
    KernelImage,
    register_gpu_kernel,
    registered_gpu_kernels,
)
from .layout import BufferSpec, LaunchSpec, Param, constant, pointer

__all__ = [
    "GRAPH_TARGET",
    "NOGRAPH_TARGET",
    "BatchPlan",
    "BufferSpec",
    "GpuKernel",
    "KernelImage",
    "LaunchSpec",
    "LauncherLibrary",
    "Param",
    "build_launcher",
    "constant",
    "launcher_library",
    "plan_batch",
    "pointer",
    "register_gpu_kernel",
    "registered_gpu_kernels",
]
