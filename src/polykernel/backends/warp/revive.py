"""Warp's CPU targets in a new process: from polykernel's cache, without the kernel.

A Warp CPU target (``pk_warp_<24 hex>``) is revived, in order, from:

1. its linked handler built for this machine and jaxlib (:func:`.linked.load`):
   loaded with :mod:`ctypes` alone, so neither Warp nor llvmlite need be
   installed;
2. the copy of Warp's object (:mod:`.cache`), linked again with a handler
   generated for this jaxlib (llvmlite and a C compiler; no Warp), e.g. when the
   program was exported under another jaxlib;
3. that copy loaded with Warp's own object loader, the handler JIT-compiled
   around it (Warp and llvmlite; no compiler).

An entry that does not hash to the name it is filed under is never used.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

from .cache import Saved, read
from .linked import load
from .names import target_for

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
    if load(target):
        return True
    saved = read(target)
    if saved is None:
        return False
    if target_for(saved.digest, saved.name, saved.sig, saved.launch,
                  saved.warp) != target:  # fmt: skip
        return False  # stored under a name its parts do not hash to
    return _relink(target, saved) or _jit(target, saved)


def _relink(target: str, saved: Saved) -> bool:
    from ...errors import KernelError
    from .linked import build

    try:
        return build(target, saved.parts(), saved.object)
    except KernelError as err:  # no llvmlite, no compiler, a failed link
        log.debug("warp: cannot link %s again here (%s)", target, err)
        return False


def _jit(target: str, saved: Saved) -> bool:
    from .cpu_handler import build_cpu_handler
    from .types import init_warp

    wp = init_warp()
    if saved.warp != wp.__version__:
        log.debug("warp: %s was built by warp-lang %s", target, saved.warp)
        return False
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
