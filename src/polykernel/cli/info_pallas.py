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

__all__ = ["pallas_backend_rows", "pallas_gpu_report"]


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
    """One ``gpu_backends`` entry of ``polykernel info`` for Pallas.

    Keys: ``backend``, ``installed`` (version string or ``None``), ``cpu_usable``,
    ``cpu_detail``, ``gpu_check`` (a lowering for ``cuda`` can be checked here),
    ``gpu_check_detail``, ``gpu_usable`` (a GPU is visible to JAX), ``gpu_detail``.

    Example:
        >>> pallas_gpu_report(gpu=False)["cpu_usable"]  # doctest: +SKIP
        True
    """
    version = _jax_version()
    pallas = _found("jax.experimental.pallas")
    installed = f"jax {version} (Pallas is part of jax)" if pallas else None
    triton = _found("jax.experimental.pallas.triton") and _found("jaxlib.triton")
    if not pallas:
        cpu_detail = "jax.experimental.pallas is missing from this jax"
    else:
        cpu_detail = "interpret mode (a debugging path: the kernel runs as XLA ops)"
    if triton:
        check = (
            "lowers for cuda with Pallas' Triton backend (jaxlib's Triton dialect); "
            "XLA compiles the kernel to a cubin only on a GPU"
        )
        if _at_least(version, (0, 11)):
            check += "; JAX deprecates this backend since 0.11 (it warns)"
    else:
        check = "Pallas' Triton backend or jaxlib's Triton dialect is missing"
    plugin = _cuda_plugin()
    mosaic = (
        f"Mosaic GPU needs a GPU lowering context ({plugin})"
        if plugin
        else "Mosaic GPU lowering needs the jax CUDA plugin (not installed)"
    )
    return {
        "backend": "pallas",
        "installed": installed,
        "cpu_usable": pallas,
        "cpu_detail": cpu_detail,
        "gpu_check": pallas and triton,
        "gpu_check_detail": f"{check}; {mosaic}",
        "gpu_usable": pallas and triton and gpu,
        "gpu_detail": "Triton on XLA's stream" if gpu else "no GPU visible to JAX",
    }


def pallas_backend_rows(gpu: bool) -> list[tuple[str, str, bool, str]]:
    """The ``(backend, platform, usable, detail)`` rows of the backends table."""
    report = pallas_gpu_report(gpu)
    cpu_detail = report["cpu_detail"]
    gpu_detail = report["gpu_detail" if report["gpu_check"] else "gpu_check_detail"]
    return [
        ("pallas", "cpu", report["cpu_usable"], cpu_detail),
        ("pallas", "gpu/tpu", report["gpu_usable"], gpu_detail),
    ]
