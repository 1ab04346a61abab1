"""Numba handlers in a new process: the handler from the cache, by its name.

A handler's target name (``pk_numba_<24 hex>``) determines its cache key
(:mod:`.cache`), so a process that never saw the kernel registers it from the cache
alone, without the kernel's Python code, and (a shared object, :mod:`.shared`)
without Numba or llvmlite.
"""

from __future__ import annotations

from ...errors import KernelRegistrationError
from .build import load_cached_handler

__all__ = ["revive"]


def revive(target: str, program: str = "") -> bool:
    """Register handler ``target`` from the cache; False when the cache lacks it.

    Raises:
        KernelRegistrationError: the handler is a JIT object (built where no C
            compiler could link it) running a parallel kernel, and this process's
            Numba threading layer is not thread-safe.
    """
    del program
    try:
        return load_cached_handler(target) is not None
    except KernelRegistrationError as err:
        raise KernelRegistrationError(
            f"polykernel.load_exported: cannot register FFI target '{target}': {err}"
        ) from err
