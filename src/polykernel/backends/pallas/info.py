"""The Pallas entries of ``polykernel info``: what runs here and what is only lowered.

Cheap checks only (package metadata and ``importlib.util.find_spec``): Pallas ships
with JAX, runs anywhere in interpret mode, and lowers for CUDA through its Triton
backend with the Triton MLIR dialect bundled in jaxlib, so that check works without
a GPU. Compiling the lowered kernel to a cubin happens inside XLA on a GPU only.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from typing import Any

__all__ = ["pallas_gpu_report", "pallas_rows"]


def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package is missing or broken
        return False


def _jax_version() -> str | None:
    try:
        return importlib.metadata.version("jax")
    except importlib.metadata.PackageNotFoundError:
        return None


def _at_least(version: str | None, wanted: tuple[int, int]) -> bool:
    try:
        major, minor = (int(p) for p in (version or "").split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= wanted


def _cuda_plugin() -> str | None:
    for dist in ("jax-cuda13-plugin", "jax-cuda12-plugin"):
        try:
            return f"{dist} {importlib.metadata.version(dist)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def pallas_gpu_report(gpu: bool) -> dict[str, Any]:
    """What ``polykernel info`` says about Pallas, as data.

    Keys: ``installed`` (a version string or ``None``), ``cpu_usable``,
    ``cpu_detail``, ``gpu_check`` (a lowering for ``cuda`` can be checked here),
    ``gpu_check_detail``, ``gpu_usable`` (a GPU is visible to JAX and the Triton
    path exists), ``gpu_detail``.

    Example:
        >>> from polykernel.backends.pallas.info import pallas_gpu_report
        >>> pallas_gpu_report(gpu=False)["cpu_usable"]
        True
    """
    version = _jax_version()
    pallas = _found("jax.experimental.pallas")
    triton = _found("jax.experimental.pallas.triton") and _found("jaxlib.triton")
    if triton:
        check = (
            "lowers for cuda here (Pallas' Triton backend, jaxlib's Triton dialect; "
            "XLA compiles the cubin only on a GPU)"
        )
        if _at_least(version, (0, 11)):
            check += ", a backend JAX deprecates since 0.11"
    else:
        check = "no cuda lowering check: Pallas' Triton backend is missing"
    plugin = _cuda_plugin()
    mosaic = (
        f"Mosaic GPU unused ({plugin})"
        if plugin
        else "Mosaic GPU not lowerable (needs the jax CUDA plugin)"
    )
    return {
        "installed": f"jax {version}" if pallas else None,
        "cpu_usable": pallas,
        "cpu_detail": "interpret mode (a debugging path: the kernel runs as XLA ops)"
        if pallas
        else "jax.experimental.pallas is missing from this jax",
        "gpu_check": pallas and triton,
        "gpu_check_detail": f"{check}; {mosaic}",
        "gpu_usable": pallas and triton and gpu,
        "gpu_detail": "Triton on XLA's stream" if gpu else "no GPU visible to JAX",
    }


def pallas_rows(gpu: bool) -> list[tuple[str, str, bool, str]]:
    """The Pallas ``(backend, platform, usable, detail)`` rows of ``polykernel info``.

    Each detail says the installed version, why the row is usable or not and, for
    ``gpu``, whether the CUDA lowering can be checked on this machine.

    Example:
        >>> from polykernel.backends.pallas.info import pallas_rows
        >>> [r[1] for r in pallas_rows(gpu=False)]
        ['gpu', 'cpu']
    """
    r = pallas_gpu_report(gpu)
    installed = r["installed"] or "not installed"
    return [
        (
            "pallas",
            "gpu",
            r["gpu_usable"],
            f"{installed}; {r['gpu_detail']}; {r['gpu_check_detail']}",
        ),
        ("pallas", "cpu", r["cpu_usable"], f"{installed}; {r['cpu_detail']}"),
    ]
