"""Warp's ahead-of-time CUDA build of a kernel: PTX and cubin per architecture.

Warp compiles CUDA with its bundled NVRTC, so this works on a machine without a
GPU or a CUDA driver (the ``slow`` tests build for ``sm_80`` and ``sm_90`` here).
The images and the forward entry's name and shared-memory size are what the
native launcher (:mod:`polykernel.launcher`) needs; Warp's own runtime is not used to
launch. Builds are memoised per (module hash, architectures) in this process.
"""

from __future__ import annotations

import json
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import KernelCompilationError
from ...settings.cuda_arch import normalize_arch
from .types import init_warp

__all__ = ["CudaBuild", "build_cuda"]

_lock = threading.Lock()
_builds: dict[Any, CudaBuild] = {}


@dataclass(frozen=True)
class CudaBuild:
    """Images of one kernel: ``images`` are ``polykernel.launcher.KernelImage``."""

    entry: str  # ``<mangled name>_cuda_kernel_forward``
    images: tuple[Any, ...]
    shared_mem: int  # dynamic shared memory of the forward kernel, bytes
    block_dim: int  # threads per block Warp compiled the module for
    launch_ndim: int  # rank of wp.tid() (launch_bounds_t<N>)


def build_cuda(kernel: Any, archs: Sequence[Any]) -> CudaBuild:
    """Build ``kernel``'s module ahead of time for every arch (cubin and PTX).

    Raises:
        KernelCompilationError: Warp (NVRTC) failed to compile for an arch.
    """
    from ...launcher.kernels import KernelImage

    wp = init_warp()  # NVRTC: Warp's runtime
    numbers = tuple(sorted({int(normalize_arch(a).rstrip("af")) for a in archs}))
    module = kernel.module
    block_dim = int(module.options.get("block_dim", 256) or 256)
    key = (module.get_module_hash(block_dim), kernel.key, numbers)
    with _lock:
        known = _builds.get(key)
        if known is not None:
            return known
        images = []
        with tempfile.TemporaryDirectory(prefix="pk_warp_aot_") as tmp:
            for use_ptx, kind in ((False, "cubin"), (True, "ptx")):
                try:
                    paths = wp.compile_aot_module(
                        module, arch=list(numbers), module_dir=tmp, use_ptx=use_ptx
                    )
                except Exception as err:
                    raise KernelCompilationError(
                        f"warp_kernel '{kernel.key}': Warp could not build the kernel "
                        f"for CUDA sm_{numbers} ({kind}): {type(err).__name__}: {err}"
                    ) from err
                for path, arch in zip(sorted(paths), sorted(numbers), strict=True):
                    data = Path(path).read_bytes()
                    if kind == "ptx":
                        data = data.rstrip(b"\0")
                    images.append(KernelImage(kind, str(arch), data))
            entry = f"{kernel.get_mangled_name()}_cuda_kernel_forward"
            meta = {}
            for path in Path(tmp).glob("*.meta"):
                meta.update(json.loads(path.read_text()))
        build = CudaBuild(
            entry,
            tuple(images),
            int(meta.get(f"{entry}_smem_bytes", 0)),
            block_dim,
            int(kernel.adj.kernel_dim),
        )
        _builds[key] = build
        return build
