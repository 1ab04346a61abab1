"""The ``jax_raw`` backend's protocol object: pure JAX, every platform, the
reference."""

from __future__ import annotations

from ...contract.protocol import Backend, InfoRow
from ...platforms import PLATFORMS, Platform

__all__ = ["BACKEND", "JaxRawBackend"]


class JaxRawBackend(Backend):
    """Pure JAX: nothing to build or install, on every platform."""

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        return True, self.summary

    def info_rows(self, gpu: bool) -> list[InfoRow]:
        return [(self.name, "/".join(PLATFORMS), True, self.summary)]


#: The jax_raw backend: ``check_kernel`` and the benchmark compare against it.
BACKEND = JaxRawBackend(
    name="jax_raw",
    platforms=(Platform.CPU, Platform.GPU, Platform.TPU),
    summary="pure JAX, always available",
    reference=True,
)
