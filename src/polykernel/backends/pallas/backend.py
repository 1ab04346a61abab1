"""The ``pallas`` backend's protocol object: interpret mode on CPU, Triton on GPU, TPU.

Pallas kernels lower to XLA operations (interpret mode) or to XLA's own custom calls
(Triton, Mosaic): the backend registers no FFI target of its own. Its lowering for a
GPU needs a target GPU even where none is visible (:func:`.lowering.lowering_context`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from ...contract.protocol import Backend, InfoRow
from ...platforms import Platform

__all__ = ["BACKEND", "PallasBackend"]


class PallasBackend(Backend):
    """Pallas kernels (``jax.experimental.pallas``)."""

    def lowering_context(self, platform: str) -> contextlib.AbstractContextManager[Any]:
        from .lowering import lowering_context

        return lowering_context(platform)

    def info_rows(self, gpu: bool) -> list[InfoRow]:
        from .info import pallas_rows

        return pallas_rows(gpu)

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        if platform == Platform.TPU:
            return False, "Mosaic TPU lowering (no TPU visible to JAX)"
        row = next(r for r in self.info_rows(gpu) if r[1] == platform)
        return row[2], row[3]


#: The pallas backend.
BACKEND = PallasBackend(
    name="pallas",
    platforms=(Platform.CPU, Platform.GPU, Platform.TPU),
    summary=(
        "Pallas kernel bodies (interpret mode on CPU, Triton on GPU, Mosaic on TPU)"
    ),
)
