"""Where a call into polykernel came from: the first frame outside a folder of ours.

A warning raised several calls deep (a primitive registered twice, outputs that
disagree in a benchmark) should point at the user's line, however many of our
frames lie between; a fixed ``stacklevel`` breaks as soon as a call moves.
"""

from __future__ import annotations

import os
import sys
from types import FrameType

__all__ = ["PACKAGE_DIR", "first_outside"]

#: The folder of the polykernel package.
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def first_outside(folder: str) -> tuple[FrameType | None, int]:
    """The first frame, from our caller outward, whose file is not under
    ``folder``, and its ``stacklevel`` for a ``warnings.warn`` in our caller (1:
    our caller itself); ``(None, 1)`` when every frame is under it.

    Example:
        >>> from polykernel._frames import PACKAGE_DIR, first_outside
        >>> frame, level = first_outside(PACKAGE_DIR)
        >>> level  # this example's own frame is outside polykernel
        1
    """
    prefix = os.path.join(os.path.abspath(folder), "")
    frame, level = sys._getframe(1), 1
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(prefix):
            return frame, level
        frame, level = frame.f_back, level + 1
    return None, 1
