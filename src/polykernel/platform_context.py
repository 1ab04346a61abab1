"""Deprecated: ``polykernel.platform_context`` moved to
:mod:`polykernel.contract.platform_context`.

It still offers the names it had (``lowering_for``, ``current_platform``, ...),
with one :class:`~polykernel.errors.PolykernelDeprecationWarning` when imported; it
will be removed in polykernel 0.2 (see the CHANGELOG). Importing ``polykernel`` does
not import it.
"""

from __future__ import annotations

import warnings

from .contract.platform_context import (
    current_lowering_platform,
    current_platform,
    gpu_visible,
    lowering_for,
    lowering_platform,
    traced_for_gpu,
)
from .warning_types import PolykernelDeprecationWarning

__all__ = [
    "current_lowering_platform",
    "current_platform",
    "gpu_visible",
    "lowering_for",
    "lowering_platform",
    "traced_for_gpu",
]

# stacklevel=2 names the importing line: warnings skips importlib's own frames.
warnings.warn(
    "polykernel.platform_context is deprecated: import "
    "polykernel.contract.platform_context (lowering_for, current_platform, ...) "
    "instead; this alias will be removed in polykernel 0.2.",
    PolykernelDeprecationWarning,
    stacklevel=2,
)
