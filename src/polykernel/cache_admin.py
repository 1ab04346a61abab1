"""Whole-root cache maintenance: ``polykernel cache info|clear|prune`` and the cap.

The unit of eviction is an *entry* (``<root>/<section>/<name>/``: a native library,
a Numba handler, a Warp CPU object, a GPU kernel..., see
:mod:`polykernel.cache_store`) or, for anything else under the root, the files of
one directory. An entry whose lock another process holds (it is being built) is
skipped. Last use is the newest mtime/atime of a unit's
files (lookups touch ``meta.json``).

``POLYKERNEL_CACHE_MAX_BYTES`` (e.g. ``500M``, ``2G`` or a number of bytes) caps the
root: after each write the least recently used units go until it fits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from . import config
from .cache_store import lock_path
from .errors import CacheError

__all__ = [
    "MAX_BYTES_ENV",
    "NOT_ENTRIES",
    "apply_size_cap",
    "clear",
    "info",
    "prune",
]

MAX_BYTES_ENV = "POLYKERNEL_CACHE_MAX_BYTES"
#: Sections ``info`` always reports (others are reported when present): every
#: top-level folder of the root is a section whose sub-folders are entries.
SECTIONS = ("native", "numba")
#: Folders of a cache section that hold bookkeeping, not cache entries.
NOT_ENTRIES = frozenset({"locks", "toolchains", "failed", "tmp", "handlers"})
_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([kKmMgGtT]?)(?:i?[bB])?")


@dataclass
class _Unit:
    last_use: float
    size: int
    files: int
    paths: list[Path]
    section: str | None  # set for entries
    entry: Path | None = None


def _walk_units(root: Path) -> list[_Unit]:
    units = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        section = here.parent.name if here.parent.parent == root else None
        if section is not None and here.name not in NOT_ENTRIES:
            files = [p for p in here.rglob("*") if p.is_file()]
            dirnames.clear()
            units.append(_measure(files, [here], section, here))
        elif filenames:
            units.append(_measure([here / f for f in filenames], None, None))
    return units


def _measure(files, dirs, section, entry=None) -> _Unit:
    newest, size, count = 0.0, 0, 0
    for f in files:
        with contextlib.suppress(OSError):
            st = f.stat()
            newest = max(newest, st.st_mtime, st.st_atime)
            size, count = size + st.st_size, count + 1
    return _Unit(newest, size, count, dirs if dirs is not None else files, section,
                 entry)  # fmt: skip


def info() -> dict:
    """Size and contents of the whole cache root; creates nothing.

    ``sections`` gives entries, bytes and files of each section of the cache
    (``native``, ``numba`` always; ``warp``, ``gpu``, ... when present);
    ``subdirs`` the bytes and files of every top-level directory.

    Example:
        >>> sorted(info())[:3]
        ['bytes', 'exists', 'files']
    """
    root = config.cache_root()
    result: dict = {"root": str(root), "exists": root.is_dir(), "bytes": 0, "files": 0}
    subdirs: dict[str, dict[str, int]] = {}
    sections = {s: {"entries": 0, "bytes": 0, "files": 0} for s in SECTIONS}
    blank = {"entries": 0, "bytes": 0, "files": 0}
    for unit in _walk_units(root) if result["exists"] else []:
        top = unit.paths[0].relative_to(root).parts
        bucket = subdirs.setdefault(top[0] if len(top) > 1 else ".", _zero())
        bucket["bytes"] += unit.size
        bucket["files"] += unit.files
        if unit.section:
            sec = sections.setdefault(unit.section, dict(blank))
            sec["entries"] += 1
            sec["bytes"] += unit.size
            sec["files"] += unit.files
    result["bytes"] = sum(b["bytes"] for b in subdirs.values())
    result["files"] = sum(b["files"] for b in subdirs.values())
    result["subdirs"] = subdirs
    result["sections"] = sections
    result["native_entries"] = sections["native"]["entries"]
    result["numba_entries"] = sections["numba"]["entries"]
    return result


def _zero() -> dict[str, int]:
    return {"bytes": 0, "files": 0}


def clear() -> int:
    """Delete everything under the cache root (the root itself stays); bytes freed.

    Example:
        >>> clear() >= 0
        True
    """
    root = config.cache_root()
    if not root.is_dir():
        return 0
    freed = info()["bytes"]
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                child.unlink()
    return freed


def prune(max_bytes: int | None = None, max_age: float | None = None) -> int:
    """Evict units unused for ``max_age`` seconds, then the least recently used
    until the root holds ``<= max_bytes``; return the bytes freed.

    Raises:
        ValueError: a limit is negative or not a number.

    Example:
        >>> prune(10**12)
        0
    """
    if max_bytes is not None and (not isinstance(max_bytes, int) or max_bytes < 0):
        raise ValueError(
            f"polykernel cache prune: max_bytes must be a non-negative int, "
            f"got {max_bytes!r}"
        )
    if max_age is not None and (
        not isinstance(max_age, int | float) or not max_age >= 0
    ):
        raise ValueError(
            f"polykernel cache prune: max_age must be a non-negative number of "
            f"seconds, got {max_age!r}"
        )
    root = config.cache_root()
    if not root.is_dir():
        return 0
    units = sorted(_walk_units(root), key=lambda u: u.last_use)
    total, freed = sum(u.size for u in units), 0
    cutoff = time.time() - max_age if max_age is not None else None
    for unit in units:
        too_old = cutoff is not None and unit.last_use < cutoff
        too_big = max_bytes is not None and total - freed > max_bytes
        if not (too_old or too_big):
            continue
        if _evict(root, unit):
            freed += unit.size
    return freed


def _evict(root: Path, unit: _Unit) -> bool:
    """Delete ``unit``; an entry only if no process holds its lock."""
    if unit.entry is None:
        for p in unit.paths:
            with contextlib.suppress(OSError):
                p.unlink()
        return True
    lock = lock_path(root / unit.section, unit.entry.name)
    try:
        fh = open(lock, "a+b")  # noqa: SIM115 - closed below
    except OSError:
        fh = None  # no lock file: nobody builds it now
    try:
        if fh is not None:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False
        shutil.rmtree(unit.entry, ignore_errors=True)
        return True
    finally:
        if fh is not None:
            fh.close()


def max_bytes_from_env() -> int | None:
    """The size cap set by ``POLYKERNEL_CACHE_MAX_BYTES`` (None: no cap).

    Raises:
        CacheError: the variable is set but is not a size.
    """
    text = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not text:
        return None
    match = _SIZE.fullmatch(text)
    if match is None:
        raise CacheError(
            f"polykernel cache: ${MAX_BYTES_ENV}={text!r} is not a size; use a "
            f"number of bytes or one with a K, M, G or T suffix (e.g. 500M)."
        )
    number, unit = match.groups()
    return int(float(number) * _SUFFIX[unit.upper()])


def apply_size_cap() -> int:
    """Prune to ``POLYKERNEL_CACHE_MAX_BYTES`` if it is set; bytes freed."""
    cap = max_bytes_from_env()
    return 0 if cap is None else prune(max_bytes=cap)
