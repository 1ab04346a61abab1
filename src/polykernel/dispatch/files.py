"""A table file on disk, handled with care: read only when it is a regular file,
locked while it is rewritten, replaced atomically, symbolic links kept.

A table is data a process trusts to pick its kernels, in a directory other programs
and people may also touch. So a reader never opens what is not a regular file (a
FIFO would block it forever, a device could feed it anything), never reads more
than :data:`MAX_BYTES`, and says what it found instead of raising; a writer holds
an exclusive OS lock (``flock`` on the config directory: no lock file is left
beside the table) for the whole read-modify-write, writes a temporary file beside
the real one and renames it into place, and, when the table is a symbolic link,
replaces the file the link names so the link stays a link.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from ..settings.paths import CONFIG_ENV, ensure_private_dir

T = TypeVar("T")

__all__ = [
    "MAX_BYTES",
    "FileProblem",
    "ParsedFiles",
    "locked",
    "read_regular",
    "stamp_regular",
    "write_json",
    "write_target",
]

#: A table larger than this is not read (the catalog's is about 200 kB).
MAX_BYTES = 64 * 2**20


class FileProblem(Exception):
    """Why a path cannot be read or written as a table (a message in words)."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def link_note(path: Path) -> str | None:
    """``"a symbolic link to <target>"`` when ``path`` is one, else None."""
    return f"a symbolic link to {os.path.realpath(path)}" if path.is_symlink() else None


def _stamp(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def stamp_regular(path: Path) -> tuple[int, ...] | None:
    """The stamp :func:`read_regular` would return with the text, from one
    ``stat`` (nothing is opened); None when nothing is there.

    Raises:
        FileProblem: what :func:`read_regular` raises for what is there.
    """
    try:
        info = os.stat(path)  # follows a link: its target is what is read
    except FileNotFoundError:
        if os.path.islink(path):
            raise FileProblem("it is a symbolic link to nothing") from None
        return None
    except OSError as err:
        raise FileProblem(f"it cannot be examined ({err.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise FileProblem(f"it is {_kind(info.st_mode)}, not a regular file")
    if info.st_size > MAX_BYTES:
        raise FileProblem(f"it is {info.st_size} bytes (at most {MAX_BYTES} are read)")
    return _stamp(info)


def read_regular(path: Path) -> tuple[str, tuple[int, ...]] | None:
    """``(text, stamp)`` of ``path`` when it is a regular file (directly or through
    a symbolic link), None when nothing is there. The stamp (device, inode, size,
    modification time) tells a later read whether the file changed.

    Raises:
        FileProblem: anything else is there, or it cannot be read as UTF-8 text
            of at most :data:`MAX_BYTES`.
    """
    if stamp_regular(path) is None:
        return None
    try:
        # O_NONBLOCK: if the file was swapped for a FIFO since the stat, the open
        # still returns, and the fstat below refuses it.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        raise FileProblem(f"it cannot be opened ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileProblem(f"it is {_kind(info.st_mode)}, not a regular file")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as err:
        raise FileProblem(f"it cannot be read ({err.strerror})") from None
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise FileProblem(f"it is larger than {MAX_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise FileProblem(
            f"it is not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None
    return text, _stamp(info)


def write_target(path: Path) -> Path:
    """The file a write of ``path`` replaces: ``path``, or the file its symbolic
    link names (the link is kept).

    Raises:
        FileProblem: a link to nothing, or something other than a regular file.
    """
    try:
        target = Path(os.path.realpath(path)) if path.is_symlink() else path
        info = os.stat(target)
    except FileNotFoundError:
        if path.is_symlink():
            raise FileProblem("it is a symbolic link to nothing") from None
        return target
    except OSError as err:  # a loop of links, a parent that is not a directory
        raise FileProblem(f"it cannot be examined ({err.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise FileProblem(f"it is {_kind(info.st_mode)}, not a regular file")
    return target


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the cross-process lock of ``path``'s directory (blocks while another
    process holds it); the directory is created, owner-only, if needed.

    Raises:
        CacheError: the directory cannot be created or is not private (the message
            names ``$POLYKERNEL_CONFIG_DIR``).
    """
    directory = path.parent
    ensure_private_dir(directory, env=CONFIG_ENV)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` as the content of ``path`` atomically (call it while holding
    :func:`locked`); through a symbolic link, the file it names is replaced."""
    target = write_target(path)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{target.stem}-", suffix=".tmp", dir=target.parent
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


class ParsedFiles(Generic[T]):
    """Files parsed once per change: while a file is unchanged, asking for it again
    costs one ``stat`` (:func:`stamp_regular`); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[tuple[int, ...], T]] = {}

    def get(self, path: Path, parse: Callable[[str], T]) -> T | None:
        """``parse(text)`` of ``path`` (cached until the file changes); None when
        nothing is there.

        Raises:
            FileProblem: what :func:`read_regular` raises.
        """
        stamp = stamp_regular(path)
        if stamp is None:
            return None
        with self._lock:
            cached = self._cache.get(str(path))
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = read_regular(path)
        if found is None:
            return None
        text, stamp = found
        value = parse(text)
        with self._lock:
            self._cache[str(path)] = (stamp, value)
        return value
