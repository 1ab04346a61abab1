"""The ``numba_cuda`` backend's protocol object: native launch on GPU, simulator on CPU.

``numba_cuda_kernel`` calls go to the native GPU launcher (whose targets belong to
:mod:`polykernel.launcher`); ``numba_cuda_callable`` functions get a CUDA handler each,
named ``pk_ncc_<24 hex>`` after the function's module, name and code, which a new
process registers again once that module is imported (:mod:`.revive`).
"""

from __future__ import annotations

from ..._version import installed_version
from ...contract.protocol import Backend
from ...platforms import Platform
from .naming import TARGET_PATTERN

__all__ = ["BACKEND", "NumbaCudaBackend"]


class NumbaCudaBackend(Backend):
    """Numba-CUDA kernels: launched natively on a GPU; the CUDA simulator on CPU."""

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        ok, why = super().usable(Platform.CPU)
        if not ok:
            return ok, why
        version = f"numba-cuda {installed_version('numba-cuda')}"
        if platform == Platform.CPU:
            return True, f"{version}; Numba's CUDA simulator (slow, for tests)"
        nvvm = (installed_version("nvidia-nvvm")
                or installed_version("nvidia-cuda-nvcc-cu12") or _loaded_nvvm())
        compile_note = (
            f"PTX compiles here (NVVM {nvvm})"
            if nvvm
            else "no NVVM: PTX not compilable"
        )
        gpu_note = "native launch" if gpu else "no GPU visible to JAX"
        return gpu and bool(nvvm), f"{version}; {gpu_note}; {compile_note}"


def _loaded_nvvm() -> str | None:
    """The NVVM version Numba-CUDA finds outside pip (a system CUDA toolkit)."""
    try:
        from numba.cuda.cudadrv import nvvm

        return ".".join(map(str, nvvm.NVVM().get_version()))
    except Exception:  # no NVVM, or Numba-CUDA cannot load it: not compilable
        return None




#: The numba_cuda backend.
BACKEND = NumbaCudaBackend(
    name="numba_cuda",
    platforms=(Platform.GPU, Platform.CPU),
    summary="@cuda.jit kernels (native launch on GPU, Numba's simulator on CPU)",
    extra="numba-cuda",
    modules=("numba_cuda", "numba"),
    reviver="polykernel.backends.numba_cuda.revive:revive",
    target_pattern=TARGET_PATTERN,
)
