"""Building blocks every on-disk cache of polykernel shares.

- :func:`ensure_dir`: directories below the cache root, each created owner-only
  and refused if anyone else could write to it (``config.ensure_private_dir``);
- :func:`atomic_write`: temp file + ``os.replace``, so readers never see half a file;
- :func:`compute_key`: SHA-256 over *named* parts, each part's digest logged at
  DEBUG so "why did this rebuild?" has an answer;
- :func:`entry_lock`: an OS file lock per entry, so N processes build once;
- :func:`check_private_file`: a file about to be loaded as code is ours alone.

Each backend keeps its own layout in its own cache module (``native/cache.py``,
``backends/_numba_cache.py``); both follow one convention that
:mod:`polykernel.cache_admin` relies on: ``<root>/<section>/<key40>/`` holds an
entry whose ``meta.json`` is written last, and ``<root>/<section>/locks/<key40>.lock``
is its lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from . import config
from .errors import CacheError

__all__ = [
    "SCHEMA",
    "atomic_write",
    "check_private_file",
    "compute_key",
    "ensure_dir",
    "entry_lock",
    "lock_path",
    "sha256_file",
]

SCHEMA = "1"
KEY_CHARS = 40  # entries are named by the first 40 hex digits of their key


def ensure_dir(path: Path) -> Path:
    """Create ``path`` and its parents below the cache root, each owner-only."""
    root = config.cache_root()
    config.ensure_private_dir(root)
    rel = Path(path).relative_to(root)
    current = root
    for part in rel.parts:
        current = current / part
        config.ensure_private_dir(current)
    return Path(path)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file and ``os.replace``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def compute_key(
    parts: Mapping[str, str | bytes], log: logging.Logger | None = None
) -> str:
    """SHA-256 over named parts (order-independent); each part's digest at DEBUG.

    Example:
        >>> len(compute_key({"source": "int x;", "flags": "-O3"}))
        64
    """
    log = log or logging.getLogger(__name__)
    total = hashlib.sha256(SCHEMA.encode())
    for name in sorted(parts):
        value = parts[name]
        raw = value.encode() if isinstance(value, str) else value
        digest = hashlib.sha256(raw).hexdigest()
        log.debug("cache key part %-10s sha256=%s", name, digest)
        total.update(f"\0{name}\0{digest}".encode())
    key = total.hexdigest()
    log.debug("cache key = %s", key)
    return key


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def lock_path(section: Path, key: str) -> Path:
    """``<section>/locks/<key40>.lock`` (not created)."""
    return section / "locks" / f"{key[:KEY_CHARS]}.lock"


@contextlib.contextmanager
def entry_lock(section: Path, key: str) -> Iterator[None]:
    """Hold the exclusive OS lock of entry ``key`` of ``section`` (blocks while
    another process holds it)."""
    path = lock_path(section, key)
    ensure_dir(path.parent)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def check_private_file(path: Path, st: os.stat_result) -> None:
    """Refuse to load ``path`` (stat ``st``) unless only its owner, us, can write it.

    Raises:
        CacheError: another user owns it, or group/others may write to it.
    """
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"polykernel cache: '{path}' is not owned by you or is writable by others; "
            f"refusing to load it. Delete it or point ${config.CACHE_ENV} elsewhere."
        )
