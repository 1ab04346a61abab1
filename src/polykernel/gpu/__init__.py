"""Deprecated: ``polykernel.gpu`` moved to :mod:`polykernel.launcher`.

It still offers the names it had, and its modules :mod:`.batching` (now
:mod:`polykernel.launcher.batching`) and :mod:`.layout` (now
:mod:`polykernel.launcher.layout`, ``struct_param`` included). Importing it, or
either module, gives one :class:`~polykernel.errors.PolykernelDeprecationWarning`
that names the new paths: Python imports this package first, so the warning is
given here and the modules give none (two warnings for one import line would be
noise). It will be removed in polykernel 0.2 (see the CHANGELOG). Importing
``polykernel`` does not import it.
"""

from __future__ import annotations

import warnings

from ..launcher import (
    GRAPH_TARGET,
    NOGRAPH_TARGET,
    BatchPlan,
    BufferSpec,
    GpuKernel,
    KernelImage,
    LauncherLibrary,
    LaunchSpec,
    Param,
    build_launcher,
    constant,
    launcher_library,
    plan_batch,
    pointer,
    register_gpu_kernel,
    registered_gpu_kernels,
)
from ..warning_types import PolykernelDeprecationWarning

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

# stacklevel=2 names the importing line: warnings skips importlib's own frames.
warnings.warn(
    "polykernel.gpu is deprecated: import polykernel.launcher instead "
    "(polykernel.gpu.batching is polykernel.launcher.batching, "
    "polykernel.gpu.layout is polykernel.launcher.layout); this alias will be "
    "removed in polykernel 0.2.",
    PolykernelDeprecationWarning,
    stacklevel=2,
)
