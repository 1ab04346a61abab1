"""Contention on purpose: keep the machine's other cores busy while a pass is timed.

A tuned table measured on an idle machine is used on busy ones: under load, a
kernel that splits its work over every core (a Numba ``parallel=True`` loop) can
run five times slower than a serial one, while the idle timings called them even.
``tune(contention=True)`` times one more pass of every case with one spinning
process per core but the one the tuner runs on, and records each candidate's ratio
under that load; :mod:`polykernel.dispatch.ranking` prefers, among candidates tied
on the idle machine, the one that holds up.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

__all__ = ["busy_cores"]

_SPIN = (
    "import time\nend = time.monotonic() + {limit}\n"
    "while time.monotonic() < end: pass\n"
)


@contextlib.contextmanager
def busy_cores(count: int | None = None, limit_s: float = 600.0) -> Iterator[int]:
    """Keep ``count`` cores (default: all but one) busy with spinning processes for
    the duration of the block (each stops by itself after ``limit_s`` seconds, so
    none outlives a tuner that dies); yields how many were started."""
    count = max(0, (os.cpu_count() or 1) - 1) if count is None else max(0, count)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SPIN.format(limit=float(limit_s))],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(count)
    ]
    try:
        time.sleep(0.05 if procs else 0.0)  # let them reach their loop
        yield len(procs)
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()
