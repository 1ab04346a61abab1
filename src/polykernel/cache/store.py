"""Building blocks every on-disk cache of polykernel shares.

- :func:`ensure_dir`: directories below the cache root, each created owner-only
  and refused if anyone else could write to it (``config.ensure_private_dir``);
- :func:`atomic_write`: temp file + ``os.replace``, so readers never see half a file;
- :func:`compute_key`: SHA-256 over *named* parts, each part's digest logged at
  DEBUG so "why did this rebuild?" has an answer;
- :func:`readonly_roots`: the read-only shared tiers (``POLYKERNEL_CACHE_READONLY``);
- :func:`cache_problem`: one :class:`~polykernel.errors.CacheWarning` per cause and
  process when the cache cannot be used (the operation then runs without it);
- :func:`check_private_file`: a file about to be loaded as code is ours alone;
- :func:`open_regular` / :func:`read_regular`: only regular files are opened (a FIFO,
  a folder or a device where an artefact should be is a :class:`NotRegularFile`,
  never a hang).

Every section follows one layout that :mod:`polykernel.cache.admin` relies on:
``<root>/<section>/<key40>/`` holds an entry whose ``meta.json`` records its files,
and ``<root>/<section>/locks/<key40>.lock`` is its lock (:mod:`polykernel.cache.locks`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import stat
import tempfile
import threading
import warnings
from collections.abc import Mapping
from pathlib import Path

from ..errors import CacheError, CacheWarning, PolykernelDeprecationWarning
from ..settings import paths as config

__all__ = [
    "NOT_REGULAR",
    "READONLY_ENV",
    "REBUILT",
    "SCHEMA",
    "WITHOUT_CACHE",
    "NotRegularFile",
    "atomic_write",
    "cache_problem",
    "check_private_file",
    "compute_key",
    "describe",
    "ensure_dir",
    "open_regular",
    "read_regular",
    "readonly_roots",
    "sha256_file",
]

SCHEMA = "1"
KEY_CHARS = 40  # entries are named by the first 40 hex digits of their key
#: Read-only cache roots (``os.pathsep``-separated), looked up before the writable one.
READONLY_ENV = "POLYKERNEL_CACHE_READONLY"
log = logging.getLogger(__name__)
#: The logger's name before the modules moved into ``cache/`` (deprecated; removed
#: in polykernel 0.2): logging configured under it still gets the records.
LEGACY_LOGGER = "polykernel.cache_store"
_warned: set[str] = set()
_warned_lock = threading.Lock()


#: What happens after a fault of a cache that could not be written (the default).
WITHOUT_CACHE = "The kernel is built and run without the cache (a miss)"
#: What happens after a fault of an entry that was read.
REBUILT = (
    "It is a miss: the kernel is built again (and, where the cache can be written, "
    "the entry replaced)"
)


def cache_problem(cause: str, detail: str, outcome: str = WITHOUT_CACHE) -> None:
    """Say once per process and ``cause`` that the cache could not be used.

    ``cause`` names the failure (``"no space left"``, ``"root is a file"``...) and
    is the key of the once-per-process rule; ``detail`` what was tried (a path);
    ``outcome`` what happens instead (:data:`WITHOUT_CACHE`, :data:`REBUILT`). The
    operation that called this goes on without the cache (a miss, or an
    unpublished build). Every occurrence is logged at INFO.
    """
    with _warned_lock:
        first = cause not in _warned
        _warned.add(cause)
    _logger().info("polykernel cache: %s: %s", cause, detail)
    if first:
        warnings.warn(
            f"polykernel cache: {cause}: {detail}. {outcome}; later failures of "
            f"this kind are logged only (logger {__name__}). Check "
            f"${config.CACHE_ENV} ({config.cache_root()}).",
            CacheWarning,
            stacklevel=3,
        )


def _logger() -> logging.Logger:
    """:data:`log`, or the logger :data:`LEGACY_LOGGER` once it is configured.

    The old name is no ancestor of ``polykernel.cache.store``, so its level and
    handlers would never see our records. Logging to it only (not to both) keeps
    its setting in force and gives handlers of common ancestors (``polykernel``,
    the root) each record once; a record then no longer reaches handlers of
    ``polykernel.cache.store`` or ``polykernel.cache``. The first such record gives
    one :class:`~polykernel.errors.PolykernelDeprecationWarning`.
    """
    legacy = logging.Logger.manager.loggerDict.get(LEGACY_LOGGER)
    if not isinstance(legacy, logging.Logger) or not (
        legacy.handlers or legacy.level or legacy.disabled or not legacy.propagate
    ):
        return log  # the usual case: nobody configured the old name
    with _warned_lock:
        first = LEGACY_LOGGER not in _warned
        _warned.add(LEGACY_LOGGER)
    if first:
        # Logging must not break a cache operation, even under `-W error`.
        with contextlib.suppress(PolykernelDeprecationWarning):
            warnings.warn(
                f"logging is configured under the logger {LEGACY_LOGGER!r}, whose "
                f"records now come from {__name__!r}: configure {__name__!r} (or "
                f"'polykernel') instead; the old name will stop receiving them in "
                "polykernel 0.2.",
                PolykernelDeprecationWarning,
                stacklevel=3,
            )
    return legacy


def describe(err: BaseException) -> str:
    """A cache failure's cause, for :func:`cache_problem` (``"no space left"``)."""
    if isinstance(err, NotRegularFile):
        return NOT_REGULAR
    if isinstance(err, OSError) and err.errno is not None:
        return {
            errno.ENOSPC: "no space left on the cache's filesystem",
            errno.EDQUOT: "disk quota exceeded",
            errno.EACCES: "permission denied",
            errno.EPERM: "permission denied",
            errno.EROFS: "read-only filesystem",
            errno.ENOTDIR: "a path of the cache is a file",
            errno.ENOLCK: "file locks are not available",
        }.get(err.errno, os.strerror(err.errno).lower())
    if isinstance(err, CacheError):
        if isinstance(err.__cause__, OSError):
            return describe(err.__cause__)
        text = str(err)
        for marker, cause in (
            ("not a directory", "a path of the cache is a file"),
            ("writable by group or others", "the cache is writable by others"),
            ("owned by", "the cache belongs to another user"),
        ):
            if marker in text:
                return cause
    return type(err).__name__


def readonly_roots() -> list[Path]:
    """The read-only cache roots of ``$POLYKERNEL_CACHE_READONLY``, in order."""
    text = os.environ.get(READONLY_ENV, "")
    return [Path(p).expanduser() for p in text.split(os.pathsep) if p.strip()]


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
        >>> from polykernel.cache.store import compute_key
        >>> len(compute_key({"source": "int x;", "flags": "-O3"}))
        64
    """
    log = log or _logger()
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


#: The cause :func:`describe` gives a :class:`NotRegularFile`.
NOT_REGULAR = "a cache file that is not a regular file"


class NotRegularFile(OSError):
    """A path of the cache that should be a regular file is a FIFO, a folder, a
    socket or a device (an ``OSError``: every cache fault is a miss)."""


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """Open ``path`` (``os.open`` ``flags``) only if it is a regular file; its fd.

    Checked before opening (a device is never opened) and on the open file (no
    swap in between), and opened non-blocking: a FIFO where an artefact should be
    is a :class:`NotRegularFile`, never a read that waits for a writer.

    Raises:
        NotRegularFile: ``path`` is not a regular file.
        OSError: it cannot be opened.
    """
    try:
        before = os.stat(path)
    except FileNotFoundError:
        if not flags & os.O_CREAT:
            raise
    else:
        _refuse_irregular(path, before)
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        _refuse_irregular(path, os.fstat(fd))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _refuse_irregular(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a folder",
                stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
                stat.S_IFBLK: "a block device"}.get(stat.S_IFMT(st.st_mode),
                                                    "not a regular file")  # fmt: skip
        raise NotRegularFile(f"'{path}' is {kind}, not a regular file")


def read_regular(path: Path) -> tuple[bytes, os.stat_result]:
    """Regular file ``path``'s bytes and ``fstat`` (see :func:`open_regular`)."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return fh.read(), os.fstat(fh.fileno())


def sha256_file(path: Path) -> str:
    """The SHA-256 of regular file ``path`` (see :func:`open_regular`)."""
    with os.fdopen(open_regular(path), "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


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
