"""Fewer cyclic garbage collections while a backend emits (and so builds) a kernel.

A backend's build runs a compiler written largely in Python (Numba's typing and
lowering, Warp's code generator, Triton's front end), which allocates hundreds of
thousands of short-lived container objects. With Python's default thresholds (700,
10, 10) the collector runs a hundred times during one Numba compile, and once over
the whole heap: in a fresh process with JAX imported, ~70-90 ms of a ~350 ms first
compile of a small kernel (``benchmarks/bench_compile.py``: ``numba_kernel``'s
first call with an empty cache went from 1.04-1.14x a bare ``@numba.njit`` compile
to 0.92-0.95x).

While any thread is inside :func:`fewer_collections`, the thresholds are at least
:data:`BUILD_THRESHOLDS`; the last one out restores the process's own. This changes
when the collector runs, never what a program computes: reference counting still
frees every object that is not in a cycle at once, collections stay automatic (only
rarer, so garbage held in cycles is bounded as before, by a larger count), and
whether the collector is enabled is not touched. Thresholds a user sets while a
build runs are theirs: the restore only undoes what this module set. A process
forked while another thread builds (``os.fork``, multiprocessing's ``fork``) has
only the forking thread: it gets a new lock and counts only that thread's own
blocks, so it neither waits on a lock no thread will release nor keeps the raised
thresholds for a build that is not there.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BUILD_THRESHOLDS", "fewer_collections"]

#: The least thresholds during a build: the youngest generation every 50,000 new
#: objects, each older one every 50 collections of the one below it.
BUILD_THRESHOLDS = (50_000, 50, 50)

_lock = threading.Lock()
_inside = 0  # blocks open now, all threads together
_here = threading.local()  # .depth: blocks open on this thread
_restore: tuple[int, ...] = ()  # the thresholds to restore when the last leaves
_ours: tuple[int, ...] = ()  # what this module set (restored only while unchanged)


@contextmanager
def fewer_collections() -> Iterator[None]:
    """Raise the collector's thresholds to at least :data:`BUILD_THRESHOLDS` for the
    block (re-entrant and thread-safe: the last block to end restores them).

    Example:
        >>> import gc
        >>> from polykernel.contract.collecting import fewer_collections
        >>> before = gc.get_threshold()
        >>> with fewer_collections():
        ...     gc.get_threshold() >= (50_000, 50, 50)
        True
        >>> gc.get_threshold() == before
        True
    """
    global _inside, _restore, _ours
    with _lock:
        if _inside == 0:
            _restore = gc.get_threshold()
            _ours = tuple(map(max, _restore, BUILD_THRESHOLDS))
            if _ours != _restore:
                gc.set_threshold(*_ours)
        _inside += 1
        _here.depth = getattr(_here, "depth", 0) + 1
    try:
        yield
    finally:
        with _lock:
            _here.depth -= 1
            _inside -= 1
            _restore_if_last()


def _restore_if_last() -> None:
    if _inside == 0 and gc.get_threshold() == _ours != _restore:
        gc.set_threshold(*_restore)


def _forked() -> None:
    """In a forked child: only the forking thread is there (its own blocks stay
    open); the lock is new, as another thread may have held it at the fork."""
    global _lock, _inside
    _lock = threading.Lock()
    _inside = getattr(_here, "depth", 0)
    _restore_if_last()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forked)
