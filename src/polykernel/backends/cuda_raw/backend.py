"""The ``cuda_raw`` backend: C++ (CPU) and CUDA (GPU) source compiled on the fly.

Its kernels are the functions of modules that ``load_cpp_*``/``load_cuda_*`` compile
through the one native build path and register through the one target registry;
their content-versioned targets (``"<module>.<function>.pk<key16>"``) are revived
in a new process from the compiled library in the cache.
"""

from __future__ import annotations

from ...contract.protocol import Backend
from ...errors import ToolchainError
from ...platforms import Platform

__all__ = ["BACKEND", "CudaRawBackend"]


class CudaRawBackend(Backend):
    """Raw C++/CUDA: usable where the host compiler (CPU) or nvcc and a GPU are."""

    def usable(self, platform: str, gpu: bool = False) -> tuple[bool, str]:
        from ...native import toolchain

        finder = "find_nvcc" if platform == Platform.GPU else "find_host_compiler"
        label = "nvcc" if platform == Platform.GPU else "C++ compiler"
        try:
            found = getattr(toolchain, finder)()
        except ToolchainError as err:
            return False, f"{label}: {' '.join(str(err).split())}"
        if platform == Platform.GPU and not gpu:
            return False, f"{label}: {found}; no GPU visible to JAX"
        return True, f"{label}: {found}"


#: The cuda_raw backend.
BACKEND = CudaRawBackend(
    name="cuda_raw",
    platforms=(Platform.CPU, Platform.GPU),
    summary="C++/CUDA source compiled on the fly (load_cpp_* / load_cuda_*)",
    reviver="polykernel.backends.cuda_raw.revive:revive",
    target_pattern=r".+\.[^.]+\.pk[0-9a-f]{16}",
)
