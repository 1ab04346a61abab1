"""What the machine info of a run must name: the GPUs JAX sees in this process (none
under ``make test``'s ``JAX_PLATFORMS=cpu``; the GPU under ``make test-gpu``)."""

from __future__ import annotations


def gpus_jax_sees() -> list[str]:
    """The device kinds of the GPUs JAX sees here, e.g. ``['NVIDIA H200']``."""
    import jax

    try:
        return [d.device_kind for d in jax.devices("gpu")]
    except RuntimeError:
        return []
