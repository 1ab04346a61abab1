"""Progress display for long benchmark runs.

On a terminal it redraws one bar line (``\\r``) naming the current primitive, config
and backend; on anything else (a pipe, a CI log) it prints one plain line per step,
so logs stay readable.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["Progress"]

_BAR_WIDTH = 24
# A terminal of 100 columns shows the whole line without wrapping (a wrapped line
# would break the redraw with \r).
_LINE_WIDTH = 99


class Progress:
    """Count (primitive, config, backend) steps and show where a run is.

    Args:
        stream: Where to write (default ``sys.stderr``, keeping stdout for tables).
        tty: Force bar (``True``) or plain-line (``False``) mode; default: whether
            ``stream`` is a terminal.

    Example:
        >>> import io
        >>> from polykernel.benchmark.progress import Progress
        >>> out = io.StringIO()
        >>> p = Progress(out)
        >>> p.add_total(2)
        >>> p.advance("op", "n=10", "numba")
        >>> out.getvalue()
        '[1/2] op | n=10 | numba\\n'
    """

    def __init__(self, stream: TextIO | None = None, tty: bool | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.tty = tty
        self.total = 0
        self.done = 0
        self._drawn = False

    def add_total(self, n: int) -> None:
        """Announce ``n`` more steps (called once per primitive)."""
        self.total += n

    def advance(self, primitive: str, config: str, backend: str) -> None:
        """Start the next step and show it."""
        self.done += 1
        where = f"{primitive} | {config} | {backend}"
        if not self.tty:
            self.stream.write(f"[{self.done}/{self.total}] {where}\n")
        else:
            filled = _BAR_WIDTH * self.done // max(self.total, 1)
            bar = "#" * filled + "-" * (_BAR_WIDTH - filled)
            line = f"[{bar}] {self.done}/{self.total} {where}"
            self.stream.write("\r" + line[:_LINE_WIDTH].ljust(_LINE_WIDTH))
            self._drawn = True
        self.stream.flush()

    def close(self) -> None:
        """End the bar line (terminal mode) so later output starts cleanly."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
