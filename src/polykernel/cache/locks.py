"""Per-entry OS file locks: builders hold them, ``prune`` and ``clear`` take them.

``<root>/<section>/locks/<key40>.lock`` guards entry ``<key40>`` of a section. A
builder holds it (blocking) while it looks the entry up again, builds, publishes and
loads; ``prune``/``clear`` take it without blocking and skip an entry whose lock is
busy, so they never delete what a build holds.

Lock files are removed by ``clear`` when free, so a process may open a lock file,
lose it to that removal, then lock the removed file and hold nothing another
process can see. A lock therefore counts only when, once taken, the path still
names the locked file (same device and inode); otherwise it is taken again.
``clear`` also removes the ``locks`` folder once it is empty, so a builder that
finds its folder gone before it could open its lock file makes it again.

Locks never fail a build: with ``POLYKERNEL_CACHE_LOCKING=0`` (or ``false``, ``no``,
``off``: :func:`polykernel.config.env_flag`; a filesystem whose
``fcntl`` locks do not work) or a lock that cannot be created or taken, a builder
goes on unlocked after one :func:`~polykernel.cache.store.cache_problem` warning —
publication is atomic (:mod:`polykernel.cache.entries`), so builders never mix
artefacts; they may only build the same entry twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..errors import CacheError, CacheWarning
from ..settings import paths as config
from .store import KEY_CHARS, cache_problem, describe, ensure_dir, open_regular

__all__ = [
    "LOCKING_ENV",
    "entry_lock",
    "eviction_lock",
    "held_by_another",
    "lock_path",
    "locking_enabled",
    "remove_free_lock",
]

#: ``0``/``false``/``no``/``off`` disables file locks (for filesystems whose ``fcntl``
#: locks do not work); another value that is not an on/off spelling warns.
LOCKING_ENV = "POLYKERNEL_CACHE_LOCKING"


def locking_enabled() -> bool:
    """False when ``$POLYKERNEL_CACHE_LOCKING`` says off (``0``, ``false``, ``no``,
    ``off``, any case); on when unset, and after one ``CacheWarning`` when it holds
    something else (:func:`polykernel.config.env_flag`)."""
    return config.env_flag(LOCKING_ENV, default=True, category=CacheWarning)


def lock_path(section: Path, key: str) -> Path:
    """``<section>/locks/<key40>.lock`` (not created)."""
    return section / "locks" / f"{key[:KEY_CHARS]}.lock"


#: Times a lock's folder is made again when ``clear`` removed it in between.
_FOLDER_REMADE = 100


def _take(path: Path, blocking: bool) -> BinaryIO | None:
    """Open (creating) and lock ``path``; the locked file, or None when
    ``blocking`` is False and another holds it.

    Raises:
        OSError, CacheError: the lock file cannot be created or locked.
    """
    remade = 0
    while True:
        ensure_dir(path.parent)
        try:
            # A regular file only (a FIFO in the way: an OSError, the build unlocked).
            fd = open_regular(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        except FileNotFoundError:
            # `clear` removed the (empty) locks folder between the two: make it
            # again, a bounded number of times (a clear running back to back).
            remade += 1
            if remade > _FOLDER_REMADE:
                raise
            continue
        fh = os.fdopen(fd, "a+b")
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            fh.close()
            return None
        except OSError:
            fh.close()
            raise
        if _still_named(fh, path):
            return fh
        fh.close()  # a removed lock file: take the one the path names now


def _still_named(fh: BinaryIO, path: Path) -> bool:
    try:
        here, named = os.fstat(fh.fileno()), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (named.st_dev, named.st_ino)


@contextlib.contextmanager
def entry_lock(section: Path, key: str) -> Iterator[bool]:
    """Hold the exclusive lock of entry ``key`` of ``section`` (blocks while another
    process holds it); yields whether a lock is held (False: build unlocked)."""
    if not locking_enabled():
        yield False
        return
    path = lock_path(section, key)
    try:
        fh = _take(path, blocking=True)
    except (OSError, CacheError) as err:
        cache_problem(describe(err), f"cannot take the build lock {path}")
        yield False
        return
    assert fh is not None  # a blocking take returns the file or raises
    with fh:
        yield True


@contextlib.contextmanager
def eviction_lock(section: Path, key: str) -> Iterator[bool]:
    """For ``prune``/``clear``: yields True when entry ``key`` may be deleted now
    (its lock is held here, or locks are off or cannot be made, as for builders),
    False when a build holds it."""
    if not locking_enabled():
        yield True
        return
    try:
        fh = _take(lock_path(section, key), blocking=False)
    except (OSError, CacheError):
        yield True  # builders cannot lock here either: they build unlocked
        return
    if fh is None:
        yield False
        return
    with fh:
        yield True


def held_by_another(section: Path, key: str) -> bool:
    """Whether another process (or thread) holds the lock of entry ``key`` now."""
    with eviction_lock(section, key) as free:
        return not free


def remove_free_lock(path: Path) -> bool:
    """Remove lock file ``path`` if no process holds it; whether it was removed.

    Only the holder of the file the path names unlinks it, so no two processes
    (two ``clear`` runs included) can end up holding different files for one entry.
    """
    try:
        # Only a regular file is a lock file: a FIFO in the way never hangs `clear`
        # (it is left where it is).
        fh = os.fdopen(open_regular(path), "rb")
    except OSError:
        return False
    with fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held by a build
        if not _still_named(fh, path):
            return False  # already removed (and perhaps made again) by another
        try:
            path.unlink()
        except OSError:
            return False
        return True
