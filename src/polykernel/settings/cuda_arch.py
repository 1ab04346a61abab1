"""CUDA architecture names, normalised (a leaf: settings and the toolchain use it)."""

from __future__ import annotations

import re

from ..errors import UnsupportedArchError

__all__ = ["normalize_arch"]


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
