"""One native launcher for compiled GPU kernels (Numba-CUDA, Triton, Warp, ...).

- :mod:`.layout`: the parameter layout and launch spec (pure, unit-tested);
- :mod:`.batching`: what a call launches under ``jax.vmap`` (pure);
- :mod:`.build`: build and load ``launcher/csrc/gpu_launcher.cc`` and its
  headers in ``launcher/csrc/gpu_launcher/`` (cached);
- :mod:`.kernels`: :func:`register_gpu_kernel`, content-derived kernel ids;
  :mod:`.images`: a kernel's cubin/PTX images;
- :mod:`.cache`: kernels and compiled builds in the cache (a new process launches
  and finds them without a compiler); :mod:`.revive`: targets of exported programs.

See ``docs/gpu.md``. Importing this package imports neither JAX nor any GPU package,
touches no disk and imports none of its modules: each public name is imported from
its module when first asked for (a warm process's lowering imports only what it
uses); the launcher is built on first registration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .batching import BatchPlan, plan_batch
    from .build import LauncherLibrary, build_launcher, launcher_library
    from .images import KernelImage
    from .kernels import (
        GRAPH_TARGET,
        NOGRAPH_TARGET,
        GpuKernel,
        register_gpu_kernel,
        registered_gpu_kernels,
    )
    from .layout import BufferSpec, LaunchSpec, Param, constant, pointer

#: public name -> the module of this package that defines it.
_LAZY = {
    "BatchPlan": "batching",
    "plan_batch": "batching",
    "LauncherLibrary": "build",
    "build_launcher": "build",
    "launcher_library": "build",
    "GRAPH_TARGET": "kernels",
    "NOGRAPH_TARGET": "kernels",
    "GpuKernel": "kernels",
    "KernelImage": "images",
    "register_gpu_kernel": "kernels",
    "registered_gpu_kernels": "kernels",
    "BufferSpec": "layout",
    "LaunchSpec": "layout",
    "Param": "layout",
    "constant": "layout",
    "pointer": "layout",
}

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


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
