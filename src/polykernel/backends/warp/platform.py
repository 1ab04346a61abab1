"""The platform a Warp call is emitted for: the lowering's, else JAX's default."""

from __future__ import annotations

from ...lowering_platform import lowering_platform

__all__ = ["current_platform"]


def current_platform() -> str:
    """``"cpu"`` or ``"gpu"`` (JAX's ``cuda``/``rocm`` backends are ``"gpu"``)."""
    platform = lowering_platform()
    if platform is None:
        import jax

        platform = jax.default_backend()
    return "cpu" if platform == "cpu" else "gpu"
