"""Deprecated: measured dispatch moved to :mod:`polykernel.dispatch`.

``polykernel.core.dispatch`` still offers the names it had (``Dispatch``,
``device_identity``, ``make_key``, ``misses``) with a
:class:`~polykernel.errors.PolykernelDeprecationWarning`; it will be removed in
polykernel 0.2 (see the CHANGELOG). ``polykernel.Dispatch`` and
``polykernel.explain_dispatch`` are the public names.
"""

from __future__ import annotations

import warnings

from ..dispatch import Dispatch, device_identity, make_key, misses
from ..dispatch.precedence import Reason
from ..errors import PolykernelDeprecationWarning

__all__ = ["REASONS", "Dispatch", "device_identity", "make_key", "misses"]

#: Why a decision was taken (now :class:`polykernel.dispatch.Reason`).
REASONS = tuple(r.value for r in Reason)

warnings.warn(
    "polykernel.core.dispatch is deprecated: import from polykernel.dispatch "
    "(Dispatch, device_identity, make_key, misses) instead; this alias will be "
    "removed in polykernel 0.2.",
    PolykernelDeprecationWarning,
    stacklevel=2,
)
