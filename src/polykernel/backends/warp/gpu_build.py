"""Warp's ahead-of-time CUDA build of a kernel: PTX and cubin per architecture.

Warp compiles CUDA with its bundled NVRTC, so this works on a machine without a
GPU or a CUDA driver (the ``slow`` tests build for ``sm_80`` and ``sm_90`` here).
The images and the forward entry's name and shared-memory size are what the
native launcher (:mod:`polykernel.launcher`) needs; Warp's own runtime is not used to
launch. Builds are memoised per (module hash, architectures) in this process, and
kept in the cache's ``gpu_builds`` section under a content key computed without
starting Warp (:func:`content_key`): a new process whose cache holds the build
starts neither Warp's runtime nor NVRTC (on an H200 that start was ~0.8 s of the
first call).
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import KernelCompilationError
from ...launcher.cache import Build, cached_build
from ...settings.cuda_arch import normalize_arch
from .types import import_warp, init_warp

__all__ = ["CudaBuild", "build_cuda", "content_key"]
log = logging.getLogger(__name__)

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
    numbers = tuple(sorted({int(normalize_arch(a).rstrip("af")) for a in archs}))
    module = kernel.module
    block_dim = int(module.options.get("block_dim", 256) or 256)
    stored = content_key(kernel, block_dim, numbers)
    key = (stored or module.get_module_hash(block_dim), kernel.key, numbers)
    with _lock:
        known = _builds.get(key)
        if known is None:
            known = cached_build(
                stored,
                lambda: _compile(kernel, module, numbers, block_dim),
                _to_stored,
                lambda found: _from_stored(found, block_dim),
            )
        _builds[key] = known
        return known


def content_key(kernel: Any, block_dim: int, numbers: Sequence[int]) -> str | None:
    """The ``gpu_builds`` key of ``kernel``'s build for these architectures, from
    what decides Warp's output, computed without starting Warp: its module hash and
    the kernel's mangled name (Warp's identity of the code), the module's options
    resolved against ``warp.config`` (mode, optimisation level... which the hash
    leaves unresolved), the architectures and Warp's version (its code generation
    and NVRTC). None where this Warp does not expose them: built in-process only."""
    from ...launcher.cache import build_key

    wp = import_warp()
    try:
        module = kernel.module
        digest = module.get_module_hash(block_dim)
        kernel_hash = module.hashers[block_dim].kernel_hashes[kernel]
        name = str(kernel.get_mangled_name(kernel_hash=kernel_hash))
        options = module.resolve_options(wp.config, block_dim)
    except Exception as err:  # Warp's internals differ: no content key
        log.debug("warp: no content key for %r, built in-process only: %r",
                  kernel, err)  # fmt: skip
        return None
    parts = {
        "module": digest.hex() if isinstance(digest, bytes) else str(digest),
        "name": name,
        "options": sorted((str(k), repr(v)) for k, v in options.items()),
        "arches": list(numbers),
        "warp": str(wp.__version__),
    }
    return build_key("warp", parts)


def _to_stored(build: CudaBuild) -> Build:
    """``build`` as a ``gpu_builds`` entry (its block size is in the key)."""
    fields = {"shared_mem": build.shared_mem, "launch_ndim": build.launch_ndim}
    return Build(build.entry, build.images, fields)


def _from_stored(found: Build, block_dim: int) -> CudaBuild | None:
    """The :class:`CudaBuild` of a ``gpu_builds`` entry (None: not one of ours)."""
    try:
        return CudaBuild(found.entry, found.images, int(found.fields["shared_mem"]),
                         block_dim, int(found.fields["launch_ndim"]))  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None


def _compile(
    kernel: Any, module: Any, numbers: tuple[int, ...], block_dim: int
) -> CudaBuild:
    """Build with Warp (NVRTC)."""
    from ...launcher.kernels import KernelImage

    wp = init_warp()  # NVRTC: Warp's runtime
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
    return CudaBuild(
        entry,
        tuple(images),
        int(meta.get(f"{entry}_smem_bytes", 0)),
        block_dim,
        int(kernel.adj.kernel_dim),
    )
