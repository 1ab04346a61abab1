"""Warp's rows of ``polykernel info``: version, CPU use here, GPU build check.

Cheap like the rest of ``info``: package metadata and file look-ups, no import of
Warp. Warp's wheel ships ``bin/warp-clang.so`` (its CPU compiler, used by the CPU
backend) and ``bin/warp.so`` (its runtime, with NVRTC for the ahead-of-time CUDA
build). The CPU handler also needs llvmlite.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

__all__ = ["warp_rows"]

_EXTRA = "pip install 'polykernel[warp]'"


def _warp_bin() -> Path | None:
    spec = importlib.util.find_spec("warp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "bin"


def warp_rows(gpu: bool) -> list[tuple[str, str, bool, str]]:
    """``(backend, platform, usable, detail)`` for Warp on ``cpu`` and ``gpu``.

    Example:
        >>> from polykernel.backends.warp.info import warp_rows
        >>> [row[:2] for row in warp_rows(gpu=False)]
        [('warp', 'cpu'), ('warp', 'gpu')]
    """
    try:
        version = importlib.metadata.version("warp-lang")
    except importlib.metadata.PackageNotFoundError:
        version = None
    binaries = _warp_bin()
    if version is None or binaries is None:
        why = f"not installed ({_EXTRA})"
        return [("warp", "cpu", False, why), ("warp", "gpu", False, why)]
    name = f"warp-lang {version}"
    llvmlite = importlib.util.find_spec("llvmlite") is not None
    if not any(binaries.glob("warp-clang.*")):
        cpu = (False, f"{name}; this wheel has no CPU compiler (bin/warp-clang)")
    elif not llvmlite:
        cpu = (False, f"{name}; llvmlite is missing for the CPU handler ({_EXTRA})")
    else:
        cpu = (True, f"{name}; Warp's CPU build behind a native FFI handler")
    if any(binaries.glob("warp.*")):
        check = "GPU build check available (NVRTC: PTX/cubin ahead of time)"
        run = "" if gpu else "; never launched here (no GPU visible to JAX)"
        gpu_row = (gpu, f"{name}; {check}{run}")
    else:
        gpu_row = (False, f"{name}; no runtime library (bin/warp): no GPU build")
    return [("warp", "cpu", cpu[0], cpu[1]), ("warp", "gpu", gpu_row[0], gpu_row[1])]
