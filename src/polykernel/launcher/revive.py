"""The GPU launcher's targets in a new process.

An exported program calls the launcher's two targets (``polykernel_gpu_launch`` and
``polykernel_gpu_launch_nograph``) with a ``kernel`` attribute naming each kernel by
its content-derived id. Reviving them registers the launcher's handlers and every
kernel id the program names, from the cache (:mod:`.cache`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..cache.entries import DAMAGED, FOREIGN, entry_fault, read_entry
from ..errors import KernelNotAvailableError
from .cache import SECTION, spec_from_json
from .kernels import (
    KernelImage,
    kernel_id as content_id,
    register_gpu_kernel,
    register_launcher_targets,
    registered_gpu_kernels,
)

__all__ = ["PATTERN", "kernel_ids", "load_kernel", "revive"]

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


def load_kernel(kernel_id: str) -> Any:
    """Register kernel ``kernel_id`` with the launcher from the cache; the
    :class:`~.launcher.GpuKernel`, or None when the cache holds no valid entry."""
    found = read_entry(SECTION, kernel_id)
    if found is None:
        return None
    files, meta = found.files, found.meta
    try:
        spec = spec_from_json(json.loads(files["spec.json"]))
        images = tuple(KernelImage(kind, arch, files[name])
                       for kind, arch, name in meta["images"])  # fmt: skip
        entry = str(meta["entry"])
    except (KeyError, ValueError, TypeError) as err:
        entry_fault(DAMAGED, f"'{found.path}' is not a GPU kernel's entry ({err!r})")
        return None
    if content_id(entry, spec, images) != kernel_id:  # its content hashes elsewhere
        entry_fault(FOREIGN, f"'{found.path}' holds another GPU kernel")
        return None
    return register_gpu_kernel(images, entry, spec, name=str(meta.get("name", entry)))
