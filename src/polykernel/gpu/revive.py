"""The GPU launcher's targets in a new process.

An exported program calls the launcher's two targets (``polykernel_gpu_launch`` and
``polykernel_gpu_launch_nograph``) with a ``kernel`` attribute naming each kernel by
its content-derived id. Reviving them registers the launcher's handlers and every
kernel id the program names, from the cache (:mod:`.store`).
"""

from __future__ import annotations

import re

from ..errors import KernelNotAvailableError

__all__ = ["PATTERN", "kernel_ids", "revive"]

#: The launcher's target names.
PATTERN = r"polykernel_gpu_launch(_nograph)?"
_KERNEL_ID = re.compile(r"\bkernel\s*=\s*\"(pkgpu_[0-9a-f]{32})\"")


def kernel_ids(program: str) -> list[str]:
    """The launcher kernel ids an exported program's text names, sorted."""
    return sorted(set(_KERNEL_ID.findall(program)))


def revive(target: str, program: str = "") -> bool:
    """Register the launcher's targets and every kernel ``program`` launches.

    Raises:
        KernelNotAvailableError: a kernel the program launches is in no cache.
    """
    from .launcher import register_launcher_targets, registered_gpu_kernels
    from .store import load_kernel

    del target
    register_launcher_targets()
    known = registered_gpu_kernels()
    missing = [
        k for k in kernel_ids(program) if k not in known and load_kernel(k) is None
    ]
    if missing:
        raise KernelNotAvailableError(
            f"polykernel.load_exported: the program launches GPU kernel(s) "
            f"{', '.join(missing)}, which this process has not compiled and the cache "
            f"does not hold. Run it with the cache directory of the process that "
            f"exported it (POLYKERNEL_CACHE_DIR), or call the kernels once first."
        )
    return True
