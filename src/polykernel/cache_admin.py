"""Deprecated: ``polykernel.cache_admin`` moved to :mod:`polykernel.cache.admin`.

It still offers the names it had (``info``, ``prune``, ``clear``, ...), with one
:class:`~polykernel.errors.PolykernelDeprecationWarning` when imported; it will be
removed in polykernel 0.2 (see the CHANGELOG). Importing ``polykernel`` does not
import it.
"""

from __future__ import annotations

import warnings

from .cache.admin import (
    MAX_BYTES_ENV,
    NOT_ENTRIES,
    apply_size_cap,
    clear,
    info,
    prune,
)
from .warning_types import PolykernelDeprecationWarning

__all__ = ["MAX_BYTES_ENV", "NOT_ENTRIES", "apply_size_cap", "clear", "info", "prune"]

# stacklevel=2 names the importing line: warnings skips importlib's own frames.
warnings.warn(
    "polykernel.cache_admin is deprecated: import polykernel.cache.admin (info, "
    "prune, clear) instead, or run `polykernel cache info|prune|clear`; this alias "
    "will be removed in polykernel 0.2.",
    PolykernelDeprecationWarning,
    stacklevel=2,
)
