"""The ``numba`` backend's protocol object: CPU only, handlers revived from the cache.

A handler's target name (``pk_numba_<24 hex>``) determines its cache key, so a new
process registers it from the cache alone, without the kernel's Python code.
"""

from __future__ import annotations

from ...contract.protocol import Backend
from ...errors import KernelRegistrationError
from ...platforms import Platform

__all__ = ["BACKEND", "NumbaBackend"]


class NumbaBackend(Backend):
    """Numba kernels on the CPU (generated GIL-free FFI handlers)."""

    def revive(self, target: str, program: str) -> bool:
        from .build import load_cached_handler

        try:
            return load_cached_handler(target) is not None
        except KernelRegistrationError as err:
            raise KernelRegistrationError(
                f"polykernel.load_exported: cannot register FFI target '{target}': "
                f"{err}"
            ) from err


#: The numba backend.
BACKEND = NumbaBackend(
    name="numba",
    platforms=(Platform.CPU,),
    summary="@numba.njit kernels in a GIL-free XLA FFI handler",
    extra="numba",
    modules=("numba", "llvmlite"),
    target_pattern=r"pk_numba_[0-9a-f]{24}",
)
