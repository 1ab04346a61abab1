"""Running a candidate with a deadline: a call that does not return in its share of
the budget is abandoned, never waited for.

A candidate is user code: it may be slow beyond use, or never return (a kernel
stuck in a loop). Its first call — the build, the compile, one run — happens in a
worker thread the tuner waits for at most its share of the budget. Past that, the
candidate is recorded as ``timeout`` and the tuner goes on; the worker is a daemon
thread, left to finish (or not) on its own: native code cannot be interrupted from
outside, and the report says that later timings may have shared the machine with
it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["DeadlineExceeded", "call_with_deadline"]

T = TypeVar("T")


class DeadlineExceeded(Exception):
    """The call did not return within its seconds (it may still be running)."""


def call_with_deadline(fn: Callable[[], T], seconds: float) -> T:
    """``fn()``, run in a worker thread and waited for at most ``seconds``.

    Raises:
        DeadlineExceeded: ``fn`` did not return in time (it is abandoned).
        Exception: whatever ``fn`` raised.
    """
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as err:  # handed to the waiting thread
            outcome["error"] = err

    worker = threading.Thread(
        target=work, name="polykernel-tune-candidate", daemon=True
    )
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        raise DeadlineExceeded(f"it did not return within {seconds:.3g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
