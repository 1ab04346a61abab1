"""The platform a Warp call is emitted for: the lowering's, else JAX's default."""

from __future__ import annotations

from ...platform_context import current_platform as _current

__all__ = ["current_platform"]


def current_platform() -> str:
    """``"cpu"`` or ``"gpu"``: Warp runs on its CPU device or on CUDA (JAX's
    ``cuda``/``rocm`` backends both mean the GPU path)."""
    return "cpu" if _current() == "cpu" else "gpu"
