"""The on-disk cache: keys, layout, locking, integrity, and info/clear/prune.

Layout under ``config.cache_root()`` (created on first write, owner-only)::

    native/<key40>/lib.so         the compiled module
    native/<key40>/meta.json      sha256 + size of lib.so, the key parts, names
    native/<key40>/source.<ext>   the exact translation unit that was compiled
    native/locks/<key40>.lock     fcntl lock: N processes, one build
    native/toolchains/*.json      compiler fingerprints keyed by path+mtime+size
    native/failed/<name>-<key12>/ sources of failed builds, kept for inspection
    numba/ ...                    Numba handlers (``backends/_numba_cache.py``)

A key is the SHA-256 over named parts; the digest of every part is logged at DEBUG
(logger ``polykernel.native.cache``) so "why did this rebuild?" has an answer.
``meta.json`` is written last, with ``os.replace``: an entry without it, or whose
library does not match the recorded checksum, is a miss and is rebuilt. The shared
building blocks live in :mod:`polykernel.cache_store`.

``info``, ``clear`` and ``prune`` act on the *whole* cache root (every backend);
they live in :mod:`polykernel.cache_admin` and are re-exported here.
``clear_cache`` (the reference API's) removes compiled native modules only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from .. import config
from ..cache_admin import NOT_ENTRIES, apply_size_cap, clear, info, prune
from ..cache_store import (
    atomic_write,
    check_private_file,
    compute_key as _compute_key,
    ensure_dir,
    entry_lock,
    sha256_file,
)
from ..errors import KernelTypeError

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


def native_root() -> Path:
    """``<cache root>/native`` (not created)."""
    return config.cache_root() / "native"


def compute_key(parts) -> str:
    """SHA-256 over named parts, each part's digest logged at DEBUG here.

    Example:
        >>> len(compute_key({"source": "int x;", "flags": "-O3"}))
        64
    """
    return _compute_key(parts, log)


def entry_dir(key: str) -> Path:
    return native_root() / key[:40]


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
        ok = st.st_size == meta.get("size") and sha256_file(lib) == meta.get("sha256")
    except OSError:
        ok = False
    if not ok:
        log.warning("polykernel cache: %s is missing or corrupt; rebuilding", lib)
        return None
    check_private_file(lib, st)
    with contextlib.suppress(OSError):
        os.utime(meta_path)  # last use, for prune()
    return lib


@contextlib.contextmanager
def build_lock(key: str) -> Iterator[None]:
    """Hold an exclusive OS lock for ``key`` (blocks while another process builds)."""
    with entry_lock(native_root(), key):
        yield


def publish(key: str, built_lib: Path, source: str, ext: str, meta: dict) -> Path:
    """Move a freshly built library into its entry, then write ``meta.json`` last."""
    entry = ensure_dir(entry_dir(key))
    lib = entry / "lib.so"
    atomic_write(entry / f"source.{ext}", source.encode())
    digest, size = sha256_file(built_lib), built_lib.stat().st_size
    os.chmod(built_lib, 0o600)
    os.replace(built_lib, lib)
    record = {**meta, "key": key, "sha256": digest, "size": size, "time": time.time()}
    atomic_write(entry / "meta.json", json.dumps(record, indent=1).encode())
    apply_size_cap()
    return lib


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
        if entry.name in NOT_ENTRIES or entry.is_symlink() or not entry.is_dir():
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
