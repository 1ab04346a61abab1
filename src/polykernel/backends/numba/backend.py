"""The ``numba`` backend's protocol object: CPU only, handlers revived from the cache
(:mod:`.revive`)."""

from __future__ import annotations

from ...contract.protocol import Backend
from ...platforms import Platform

__all__ = ["BACKEND"]

#: The numba backend.
BACKEND = Backend(
    name="numba",
    platforms=(Platform.CPU,),
    summary="@numba.njit kernels in a GIL-free XLA FFI handler",
    extra="numba",
    modules=("numba", "llvmlite"),
    reviver="polykernel.backends.numba.revive:revive",
    target_pattern=r"pk_numba_[0-9a-f]{24}",
)
