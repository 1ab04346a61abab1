"""The Warp row of ``polykernel info``: version, CPU use here, GPU build check.

Cheap like the rest of ``info``: package metadata and file look-ups, no import of
Warp. Warp's wheel ships ``bin/warp-clang.so`` (its CPU compiler, used for the CPU
backend) and ``bin/warp.so`` (its runtime, with NVRTC for ahead-of-time CUDA
builds when the wheel is CUDA-enabled).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path
from typing import Any

__all__ = ["warp_report"]

_EXTRA = "pip install 'polykernel[warp]'"


def _warp_bin() -> Path | None:
    spec = importlib.util.find_spec("warp")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "bin"


def warp_report(gpu_present: bool = False) -> dict[str, Any]:
    """``{backend, version, cpu: (yes/no, why), gpu_build: (yes/no, why)}``.

    Example:
        >>> warp_report()["backend"]
        'warp'
    """
    try:
        version = importlib.metadata.version("warp-lang")
    except importlib.metadata.PackageNotFoundError:
        version = None
    row: dict[str, Any] = {"backend": "warp", "version": version}
    binaries = _warp_bin()
    if version is None or binaries is None:
        why = f"warp-lang is not installed ({_EXTRA})"
        row.update(cpu=False, cpu_detail=why, gpu_build=False, gpu_build_detail=why)
        return row
    clang = any(binaries.glob("warp-clang.*"))
    llvmlite = importlib.util.find_spec("llvmlite") is not None
    if clang and llvmlite:
        cpu = (True, "Warp's CPU compiler + polykernel's native FFI handler")
    elif not clang:
        cpu = (False, "this warp-lang wheel has no CPU compiler (bin/warp-clang)")
    else:
        cpu = (False, f"llvmlite is missing for the CPU handler ({_EXTRA})")
    runtime = any(binaries.glob("warp.*"))
    if runtime:
        where = "and launched" if gpu_present else "never launched here (no GPU)"
        gpu = (True, f"AOT build via Warp's NVRTC (PTX/cubin), {where}")
    else:
        gpu = (False, "this warp-lang wheel has no runtime library (bin/warp)")
    row.update(cpu=cpu[0], cpu_detail=cpu[1], gpu_build=gpu[0], gpu_build_detail=gpu[1])
    return row


def print_warp_report(row: dict[str, Any]) -> None:
    """Print ``row`` as ``polykernel info`` text."""

    def mark(ok: bool) -> str:
        return "yes" if ok else "no "

    print(f"  {row['backend']:<11} {row['version'] or 'not installed'}")
    print(f"    {'cpu':<11} {mark(row['cpu'])}  {row['cpu_detail']}")
    print(f"    {'gpu build':<11} {mark(row['gpu_build'])}  {row['gpu_build_detail']}")
