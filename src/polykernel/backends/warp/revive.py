"""Warp's CPU targets in a new process: from a copy of Warp's build in our cache.

A Warp CPU target (``pk_warp_<24 hex>``) is a handler JIT-compiled around the entry
point of Warp's CPU build of the kernel's module. :mod:`.cache` keeps a copy of that
object file and what the handler was built from when the target is registered. In a
process that never saw the kernel, :func:`revive` loads the copy with Warp's own
object loader, looks the entry up and builds the same handler around it — no Python
kernel needed. The target name is recomputed from the stored parts first: an entry
that does not hash to the name it is filed under is not used.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

from .cache import read
from .cpu_handler import build_cpu_handler
from .cpu_target import target_for
from .types import import_warp

__all__ = ["revive"]

log = logging.getLogger(__name__)
_lock = threading.Lock()
_counter = itertools.count()


class _LoadedObject:
    """Keeps a revived Warp object loaded (Warp unloads it by handle)."""

    def __init__(self, handle: str) -> None:
        self.handle = handle


def revive(target: str, program: str = "") -> bool:
    """Register Warp CPU target ``target`` from the cache; False when it cannot."""
    del program
    saved = read(target)
    if saved is None:
        return False
    wp = import_warp()
    if saved.warp != wp.__version__:
        log.debug("warp: %s was built by warp-lang %s", target, saved.warp)
        return False
    if target_for(saved.digest, saved.name, saved.sig, saved.launch) != target:
        return False  # stored under a name its parts do not hash to
    address, owner = _load(wp, saved.object, saved.entry)
    if not address:
        return False
    build_cpu_handler(target, saved.sig, saved.label, saved.plan, address,
                      saved.launch, owner)  # fmt: skip
    return True


def _load(wp: Any, data: bytes, entry: str) -> tuple[int, Any]:
    """Load a Warp CPU object with Warp's loader; ``(entry address, owner)``."""
    import ctypes

    import warp._src.context as context

    wp.init()
    llvm = getattr(context.runtime, "llvm", None)
    if llvm is None:  # this Warp build has no CPU loader
        return 0, None
    with _lock:
        handle = f"pk_revived_{next(_counter)}"
        buffer = ctypes.create_string_buffer(data, len(data))
        legacy = bool(getattr(wp.config, "legacy_cpu_linker", False))
        if llvm.wp_load_obj_from_bytes(buffer, len(data), handle.encode(), legacy):
            return 0, None
        address = llvm.wp_lookup(handle.encode(), entry.encode())
    return int(address or 0), _LoadedObject(handle)
