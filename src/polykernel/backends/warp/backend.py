"""The ``warp`` backend's protocol object: Warp's CPU device and CUDA GPUs.

Its CPU targets (``pk_warp_<24 hex>``) are handlers linked with Warp's CPU build
into one shared object kept in polykernel's cache (:mod:`.linked`), loaded again
by a new process, or by :mod:`.revive` in one that never saw the kernel, with
neither Warp nor llvmlite.
"""

from __future__ import annotations

from ...contract.protocol import Backend, InfoRow
from ...platforms import Platform

__all__ = ["BACKEND", "WarpBackend"]


class WarpBackend(Backend):
    """NVIDIA Warp kernels: a native FFI handler on CPU, our launcher on CUDA."""

    def info_rows(self, gpu: bool) -> list[InfoRow]:
        from .info import warp_rows

        return warp_rows(gpu)

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        row = next(r for r in self.info_rows(gpu) if r[1] == platform)
        return row[2], row[3]


#: The warp backend.
BACKEND = WarpBackend(
    name="warp",
    platforms=(Platform.CPU, Platform.GPU),
    summary="NVIDIA Warp kernels (CPU device, CUDA ahead of time)",
    extra="warp",
    modules=("warp", "llvmlite"),
    reviver="polykernel.backends.warp.revive:revive",
    target_pattern=r"pk_warp_[0-9a-f]{24}",
)
