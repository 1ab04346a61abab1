"""The ``triton`` backend's protocol object: the interpreter on CPU, cubins on GPU.

Its GPU calls go to the native launcher, whose targets belong to the launcher
(:mod:`polykernel.launcher`); it registers no FFI target of its own.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from ...contract.protocol import Backend
from ...platforms import Platform

__all__ = ["BACKEND", "TritonBackend"]


class TritonBackend(Backend):
    """Triton kernels: Triton's interpreter on the CPU, a cubin on the GPU."""

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        ok, why = super().usable(Platform.CPU)
        if not ok:
            return ok, why
        version = _version()
        if platform == Platform.CPU:
            return True, f"triton {version}; Triton's interpreter (tests, small inputs)"
        spec = importlib.util.find_spec("triton")
        roots = list(spec.submodule_search_locations or []) if spec else []
        ptxas = any((Path(r) / "backends/nvidia/bin/ptxas").is_file() for r in roots)
        check = (
            "cubins compile here (bundled ptxas)"
            if ptxas
            else "no bundled ptxas: cannot compile cubins"
        )
        return gpu, f"triton {version}; {check}" + (
            "" if gpu else "; no GPU visible to JAX"
        )


def _version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return "?"


#: The triton backend.
BACKEND = TritonBackend(
    name="triton",
    platforms=(Platform.CPU, Platform.GPU),
    summary="@triton.jit kernels (interpreter on CPU, native launch on GPU)",
    extra="triton",
    modules=("triton",),
)
