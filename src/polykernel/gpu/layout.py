"""Deprecated: now :mod:`polykernel.launcher.layout` (the warning is the
package's, :mod:`polykernel.gpu`)."""

from __future__ import annotations

from ..launcher.layout import (
    ABI_VERSION,
    BufferSpec,
    LaunchSpec,
    Param,
    constant,
    pointer,
    struct_param,
)

__all__ = [
    "ABI_VERSION",
    "BufferSpec",
    "LaunchSpec",
    "Param",
    "constant",
    "pointer",
    "struct_param",
]
