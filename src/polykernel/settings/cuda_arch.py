"""CUDA architecture names, normalised (a leaf: settings and the toolchain use it)."""

from __future__ import annotations

import re

from ..errors import UnsupportedArchError

__all__ = ["jax_cuda_arches", "normalize_arch"]


def normalize_arch(arch: object) -> str:
    """``'sm_80'``, ``'compute_80'``, ``'8.0'``, ``80`` -> ``'80'`` (``'90a'`` kept)."""
    text = str(arch).strip().lower()
    text = re.sub(r"^(sm_|compute_)", "", text)
    if re.fullmatch(r"\d+\.\d+", text):
        text = text.replace(".", "")
    if not re.fullmatch(r"\d{2,3}[af]?", text):
        raise UnsupportedArchError(
            f"polykernel.native: CUDA architecture {arch!r} is not understood; "
            "expected e.g. 'sm_80', '80' or '8.0'."
        )
    return text


def jax_cuda_arches() -> tuple[str, ...]:
    """The architectures (``'90'``) of the CUDA GPUs this process's JAX has, sorted.

    JAX is asked by platform: ``jax.devices()`` lists only the default platform's
    devices, which under ``JAX_PLATFORMS=cpu,cuda`` are the CPU's. Asking starts
    JAX's backends: callers that must not (before the user configures JAX) check
    first. A GPU without CUDA's numbering (ROCm) is left out: no CUDA code runs there.
    """
    import jax

    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU platform in this process
        return ()
    found = set()
    for device in gpus:
        try:
            found.add(normalize_arch(getattr(device, "compute_capability", None)))
        except UnsupportedArchError:
            continue
    return tuple(sorted(found))
