"""The on-disk cache: keys, layout, locking, integrity, and info/clear/prune.

Layout under ``config.cache_root()`` (created on first write, owner-only)::

    native/<key40>/lib.so         the compiled module
    native/<key40>/meta.json      sha256 + size of lib.so, the key parts, names
    native/<key40>/source.<ext>   the exact translation unit that was compiled
    native/locks/<key40>.lock     fcntl lock: N processes, one build
    native/toolchains/*.json      compiler fingerprints keyed by path+mtime+size
    native/failed/<name>-<key12>/ sources of failed builds, kept for inspection
    numba/ ...                    Numba's own cache (written by the Numba backend)

A key is the SHA-256 over named parts; the digest of every part is logged at DEBUG
(logger ``polykernel.native.cache``) so "why did this rebuild?" has an answer.
``meta.json`` is written last, with ``os.replace``: an entry without it, or whose
library does not match the recorded checksum, is a miss and is rebuilt.

``info``, ``clear`` and ``prune`` act on the *whole* cache root (every backend);
``clear_cache`` (the reference API's) removes compiled native modules only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from .. import config
from ..errors import CacheError, KernelTypeError

__all__ = [
    "atomic_write",
    "build_lock",
    "clear",
    "clear_cache",
    "compute_key",
    "ensure_dir",
    "entry_dir",
    "info",
    "lookup",
    "native_root",
    "prune",
    "publish",
]

log = logging.getLogger(__name__)
SCHEMA = "1"
_RESERVED = {"locks", "toolchains", "failed", "tmp"}


def native_root() -> Path:
    """``<cache root>/native`` (not created)."""
    return config.cache_root() / "native"


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


def compute_key(parts: Mapping[str, str | bytes]) -> str:
    """SHA-256 over named parts (order-independent); each part's digest at DEBUG.

    Example:
        >>> len(compute_key({"source": "int x;", "flags": "-O3"}))
        64
    """
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


def entry_dir(key: str) -> Path:
    return native_root() / key[:40]


def _sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def lookup(key: str) -> Path | None:
    """The library of a valid entry for ``key``, or ``None`` (missing or corrupt).

    Raises:
        CacheError: the entry sits in a directory others can write to.
    """
    entry = entry_dir(key)
    meta_path, lib = entry / "meta.json", entry / "lib.so"
    try:
        meta = json.loads(meta_path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        log.warning("polykernel cache: unreadable %s; rebuilding", meta_path)
        return None
    for directory in (config.cache_root(), native_root(), entry):
        config.ensure_private_dir(directory)  # refuses dirs others can write
    try:
        st = lib.stat()
        ok = st.st_size == meta.get("size") and _sha256_file(lib) == meta.get("sha256")
    except OSError:
        ok = False
    if not ok:
        log.warning("polykernel cache: %s is missing or corrupt; rebuilding", lib)
        return None
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"polykernel cache: '{lib}' is not owned by you or is writable by others; "
            f"refusing to load it. Delete it or point ${config.CACHE_ENV} elsewhere."
        )
    with contextlib.suppress(OSError):
        os.utime(meta_path)  # last use, for prune()
    return lib


@contextlib.contextmanager
def build_lock(key: str) -> Iterator[None]:
    """Hold an exclusive OS lock for ``key`` (blocks while another process builds)."""
    locks = ensure_dir(native_root() / "locks")
    with open(locks / f"{key[:40]}.lock", "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def publish(key: str, built_lib: Path, source: str, ext: str, meta: dict) -> Path:
    """Move a freshly built library into its entry, then write ``meta.json`` last."""
    entry = ensure_dir(entry_dir(key))
    lib = entry / "lib.so"
    atomic_write(entry / f"source.{ext}", source.encode())
    digest, size = _sha256_file(built_lib), built_lib.stat().st_size
    os.chmod(built_lib, 0o600)
    os.replace(built_lib, lib)
    record = {**meta, "key": key, "sha256": digest, "size": size, "time": time.time()}
    atomic_write(entry / "meta.json", json.dumps(record, indent=1).encode())
    return lib


# ---- whole-root maintenance (used by `polykernel cache info|clear|prune`) ----


def _units(root: Path) -> list[tuple[float, int, list[Path]]]:
    """Evictable units as (last use, bytes, paths): a native entry, or the files of
    one directory elsewhere (e.g. one Numba cache folder)."""
    units = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here.parent == root / "native" and here.name not in _RESERVED:
            files = [here / f for f in filenames]
            dirnames.clear()
            units.append(_unit(files, [here]))
        elif filenames:
            units.append(_unit([here / f for f in filenames], None))
    return units


def _unit(files: list[Path], dirs: list[Path] | None) -> tuple[float, int, list[Path]]:
    newest, size = 0.0, 0
    for f in files:
        with contextlib.suppress(OSError):
            st = f.stat()
            newest, size = max(newest, st.st_mtime, st.st_atime), size + st.st_size
    return newest, size, dirs if dirs is not None else files


def info() -> dict:
    """Size and contents of the whole cache root (every backend); creates nothing.

    Example:
        >>> sorted(info())[:3]
        ['bytes', 'exists', 'files']
    """
    root = config.cache_root()
    result: dict = {"root": str(root), "exists": root.is_dir(), "bytes": 0, "files": 0}
    subdirs: dict[str, dict[str, int]] = {}
    if result["exists"]:
        for dirpath, _dirs, filenames in os.walk(root):
            rel = Path(dirpath).relative_to(root).parts
            top = rel[0] if rel else "."
            bucket = subdirs.setdefault(top, {"bytes": 0, "files": 0})
            for f in filenames:
                with contextlib.suppress(OSError):
                    bucket["bytes"] += os.stat(os.path.join(dirpath, f)).st_size
                    bucket["files"] += 1
        result["bytes"] = sum(b["bytes"] for b in subdirs.values())
        result["files"] = sum(b["files"] for b in subdirs.values())
        native = root / "native"
        if native.is_dir():
            names = [p for p in native.iterdir() if p.name not in _RESERVED]
            result["native_entries"] = sum(p.is_dir() for p in names)
    result["subdirs"] = subdirs
    return result


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


def prune(max_bytes: int) -> int:
    """Evict least recently used entries until the root holds ``<= max_bytes``.

    Returns:
        The number of bytes freed.

    Example:
        >>> prune(10**12)
        0
    """
    if not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(
            f"polykernel cache prune: max_bytes must be a non-negative int, "
            f"got {max_bytes!r}"
        )
    root = config.cache_root()
    if not root.is_dir():
        return 0
    units = sorted(_units(root), key=lambda u: u[0])
    total, freed = sum(u[1] for u in units), 0
    for _last, size, paths in units:
        if total - freed <= max_bytes:
            break
        for p in paths:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    p.unlink()
        freed += size
    return freed


def clear_cache(name: str | None = None) -> int:
    """Delete compiled native modules: every one, or those built for module ``name``.

    Numba handlers and other files of the cache root are kept (``polykernel cache
    clear`` removes everything). Modules already loaded in a process keep working.

    Returns:
        The number of compiled modules removed.

    Raises:
        KernelTypeError: ``name`` is neither a string nor None.

    Example:
        >>> clear_cache("no_such_module")
        0
    """
    if name is not None and not isinstance(name, str):
        raise KernelTypeError(
            f"polykernel.clear_cache: name must be a module name (str) or None, got "
            f"{type(name).__name__}: {name!r}."
        )
    native = native_root()
    if not native.is_dir():
        return 0
    removed = 0
    for entry in native.iterdir():
        if entry.name in _RESERVED or entry.is_symlink() or not entry.is_dir():
            continue
        if name is not None:
            try:
                built_for = json.loads((entry / "meta.json").read_text()).get("name")
            except (OSError, ValueError, AttributeError):
                continue  # unreadable entry: not provably this module's
            if built_for != name:
                continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += not entry.exists()
    return removed
