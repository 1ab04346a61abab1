"""Keyword arguments of a primitive call: reserved names and hashability.

Extra keywords of ``XLACustomKernel.__call__`` become static primitive parameters
(handed to the kernel generator), so they must be hashable and cannot use the names
the call itself takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import KernelRegistrationError, KernelTypeError

__all__ = ["RESERVED_KEYWORDS", "check_keywords"]

#: Keywords with a meaning of their own; a kernel parameter cannot use these names.
RESERVED_KEYWORDS = frozenset({"outs", "backend", "ins"})


def check_keywords(where: str, kwargs: Mapping[str, Any]) -> None:
    """Reject reserved or unhashable keyword arguments with a message naming them.

    Raises:
        KernelRegistrationError: a keyword uses a reserved name (a ``ValueError``).
        KernelTypeError: a keyword's value is not hashable.
    """
    for key, value in kwargs.items():
        if key in RESERVED_KEYWORDS:
            raise KernelRegistrationError(
                f"{where}: keyword '{key}' is reserved (reserved: "
                f"{sorted(RESERVED_KEYWORDS)}). Rename the kernel parameter."
            )
        try:
            hash(value)
        except TypeError:
            raise KernelTypeError(
                f"{where}: keyword argument '{key}' must be hashable because it "
                f"becomes a static primitive parameter (got {type(value).__name__}). "
                f"Pass a tuple instead of a list, or a Python scalar instead of an "
                f"array."
            ) from None
