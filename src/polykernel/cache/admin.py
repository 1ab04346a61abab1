"""Whole-root cache maintenance: ``polykernel cache info|clear|prune`` and the cap.

The unit of eviction is an *entry* (``<root>/<section>/<name>/``: a native library,
a Numba handler, a Warp CPU object, a GPU kernel..., see
:mod:`polykernel.cache.entries`) or, for anything else under the root, the files of
one directory. ``prune`` and ``clear`` take the same per-entry locks as builders and
never delete what a build holds: an entry whose lock another process holds (it is
being built or published), and a staging folder of a publication in progress, are
skipped; lock files themselves are only removed when free. Last use is the newest
mtime/atime of a unit's files (lookups touch ``meta.json``).

``POLYKERNEL_CACHE_MAX_BYTES`` (e.g. ``500M``, ``2G`` or a number of bytes) caps the
root: after each write the least recently used units go until it fits.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path

from ..errors import CacheError, KernelTypeError
from ..settings import paths as config
from .locks import eviction_lock, remove_free_lock
from .store import KEY_CHARS

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
#: The prefix of an entry's staging folder (``cache_entries.STAGING``).
_STAGING = ".staging-"
#: A staging folder this young may belong to a publication without a lock.
_STAGING_GRACE = 3600.0
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

    @property
    def lock_key(self) -> str:
        """The key whose lock guards this entry (a staging folder's too)."""
        name = self.entry.name if self.entry is not None else ""
        if name.startswith(_STAGING):
            return name[len(_STAGING) :][:KEY_CHARS]
        return name


def _walk_units(root: Path) -> list[_Unit]:
    units = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here.name == "locks" and here.parent.parent == root:
            dirnames.clear()  # lock files are the builders', never a unit
            continue
        section = here.parent.name if here.parent.parent == root else None
        if section is not None and here.name not in NOT_ENTRIES:
            files = _files_under(here)
            dirnames.clear()
            units.append(_measure(files, [here], section, here))
        elif filenames:
            units.append(_measure([here / f for f in filenames], None, None))
    return units


def _files_under(folder: Path) -> list[Path]:
    """Every file below ``folder``; what vanishes meanwhile (a publication renaming
    its staging folder, another admin command) is skipped, never an error."""
    return [Path(d) / f for d, _dirs, files in os.walk(folder) for f in files]


def _measure(files, dirs, section, entry=None) -> _Unit:
    newest, size, count = 0.0, 0, 0
    for f in files:
        with contextlib.suppress(OSError):
            st = f.stat()
            newest = max(newest, st.st_mtime, st.st_atime)
            size, count = size + st.st_size, count + 1
    return _Unit(newest, size, count, dirs if dirs is not None else files, section,
                 entry)  # fmt: skip


def root_problem(root: Path) -> str | None:
    """Why ``root`` cannot serve as the cache root, or None (missing is no problem:
    it is created on first write)."""
    try:
        st = root.stat()
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"cannot be inspected ({err.strerror})"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory (a file is in the way): nothing is cached"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"is owned by uid {st.st_uid}, not by you: never loaded from"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "is writable by group or others: never loaded from"
    if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        return "is not readable and writable by you: nothing is cached"
    return None


def info() -> dict:
    """Size and contents of the whole cache root; creates nothing.

    ``sections`` gives entries, bytes and files of each section of the cache
    (``native``, ``numba`` always; ``warp``, ``gpu``, ... when present);
    ``subdirs`` the bytes and files of every top-level directory; ``problem`` why
    the root cannot be used as it is (None when it can, or does not exist yet).

    Example:
        >>> from polykernel.cache.admin import info
        >>> sorted(info())[:3]
        ['bytes', 'exists', 'files']
    """
    root = config.cache_root()
    problem = root_problem(root)
    result: dict = {"root": str(root), "exists": root.is_dir(), "bytes": 0, "files": 0,
                    "problem": problem}  # fmt: skip
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
    """Delete everything under the cache root that no build holds (the root itself
    stays); bytes freed.

    Example:
        >>> from polykernel.cache.admin import clear
        >>> clear() >= 0
        True
    """
    root = config.cache_root()
    if not root.is_dir():
        return 0
    freed = sum(unit.size for unit in _walk_units(root) if _evict(root, unit))
    _remove_free_locks(root)
    folders = [Path(d) / n for d, names, _files in os.walk(root) for n in names]
    for child in sorted(folders, key=lambda p: -len(p.parts)):
        if not child.is_symlink():
            with contextlib.suppress(OSError):
                child.rmdir()  # only empty folders go
    return freed


class _LimitTypeError(KernelTypeError, ValueError):
    """A ``prune`` limit of the wrong type: our ``TypeError``, and the
    ``ValueError`` ``prune`` raised for it before."""


def _limit(name: str, value, expected: str, types: tuple[type, ...]):
    """``value`` checked as a ``prune`` limit (None: no limit); ints stay ints."""
    if value is None:
        return None
    example = "2**30 (bytes)" if name == "max_bytes" else "7 * 86400 (a week)"
    if isinstance(value, bool) or not isinstance(value, types):
        raise _LimitTypeError(
            f"polykernel cache prune: {name} must be a non-negative {expected}, got "
            f"{value!r} ({type(value).__name__}). Pass e.g. {name}={example}, or "
            f"None for no limit."
        )
    value = int(value) if isinstance(value, Integral) else float(value)
    if not value >= 0:
        raise ValueError(
            f"polykernel cache prune: {name} must be a non-negative {expected}, got "
            f"{value!r}. Pass e.g. {name}={example}, or None for no limit."
        )
    return value


def prune(max_bytes: int | None = None, max_age: float | None = None) -> int:
    """Evict units unused for ``max_age`` seconds, then the least recently used
    until the root holds ``<= max_bytes``; return the bytes freed. What a build
    holds is skipped.

    Raises:
        KernelTypeError: a limit of the wrong type (a ``bool``, a string; a float
            for ``max_bytes``) — also a ``ValueError``, as before.
        ValueError: a limit is negative or NaN.

    Example:
        >>> from polykernel.cache.admin import prune
        >>> prune(10**12)
        0
    """
    byte_limit = _limit("max_bytes", max_bytes, "int", (Integral,))
    max_bytes = None if byte_limit is None else int(byte_limit)  # an int already
    max_age = _limit("max_age", max_age, "number of seconds", (Real,))
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
    """Delete ``unit``; an entry only while holding its lock (never one a build
    holds), a staging folder only once it is stale."""
    if unit.entry is None:
        for p in unit.paths:
            with contextlib.suppress(OSError):
                p.unlink()
        return True
    assert unit.section is not None  # entries have a section
    staging = unit.entry.name.startswith(_STAGING)
    if staging and time.time() - unit.last_use < _STAGING_GRACE:
        return False  # a publication in progress (perhaps without a lock)
    with eviction_lock(root / unit.section, unit.lock_key) as free:
        if not free:
            return False  # a build holds it
        shutil.rmtree(unit.entry, ignore_errors=True)
        return not unit.entry.exists()


def _remove_free_locks(root: Path) -> None:
    """Remove the lock files no process holds."""
    for path in root.glob("*/locks/*.lock"):
        remove_free_lock(path)


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
