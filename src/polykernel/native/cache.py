"""The ``native`` section of the cache: compiled libraries, keyed by content.

Layout under ``config.cache_root()`` (created on first write, owner-only)::

    native/<key40>/lib.so         the compiled module
    native/<key40>/source.<ext>   the exact translation unit that was compiled
    native/<key40>/meta.json      key, size and SHA-256 of each file, name, command
    native/locks/<key40>.lock     fcntl lock: N processes, one build
    native/toolchains/*.json      compiler fingerprints keyed by path+mtime+size
    native/failed/<name>-<key12>/ sources of failed builds, kept for inspection
    pch/<key40>/polykernel.h.gch  polykernel.h precompiled for GCC (:mod:`.pch`)

Entries are stored, verified and published atomically by
:mod:`polykernel.cache.entries` (read-only tiers first, any fault a miss). A key is
the SHA-256 over named parts; the digest of every part is logged at DEBUG (logger
``polykernel.native.cache``) so "why did this rebuild?" has an answer.

``info``, ``clear`` and ``prune`` act on the *whole* cache root (every section);
they live in :mod:`polykernel.cache.admin` and are re-exported here.
``clear_cache`` (the reference API's) removes compiled native modules only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..cache.admin import NOT_ENTRIES, apply_size_cap, clear, info, prune
from ..cache.entries import Entry, publish_entry, read_entry
from ..cache.locks import entry_lock, held_by_another
from ..cache.store import compute_key as _compute_key, read_regular
from ..errors import KernelTypeError
from ..settings import paths as config

__all__ = [
    "LIBRARY",
    "SECTION",
    "build_lock",
    "clear",
    "clear_cache",
    "compute_key",
    "info",
    "lookup",
    "lookup_entry",
    "native_root",
    "private_dir",
    "prune",
    "publish",
]

log = logging.getLogger(__name__)
#: The section's folder under the cache root.
SECTION = "native"
#: The library's file name in an entry.
LIBRARY = "lib.so"
_private: Path | None = None
_private_lock = threading.Lock()


def native_root() -> Path:
    """``<cache root>/native`` (not created)."""
    return config.cache_root() / SECTION


def compute_key(parts: Mapping[str, str | bytes]) -> str:
    """SHA-256 over named parts, each part's digest logged at DEBUG here.

    Example:
        >>> from polykernel.native.cache import compute_key
        >>> len(compute_key({"source": "int x;", "flags": "-O3"}))
        64
    """
    return _compute_key(parts, log)


def private_dir() -> Path:
    """A folder of this process alone, outside the cache, removed at exit: where
    builds run and where a read-only tier's library is copied before loading."""
    global _private
    with _private_lock:  # threads building at once (``cache warm``) share one
        if _private is None or not _private.is_dir():
            import atexit

            _private = Path(tempfile.mkdtemp(prefix="polykernel-native-"))
            atexit.register(shutil.rmtree, _private, True)
        return _private


def lookup_entry(key: str) -> Entry | None:
    """The verified entry of ``key`` (read-only tiers first), or None."""
    found = read_entry(SECTION, key)
    if found is None or LIBRARY not in found.files:
        return None
    return found


def lookup(key: str) -> Path | None:
    """The library of a valid entry for ``key``, ready to ``dlopen``, or None.

    From the writable root it is the entry's own file (verified, in folders only
    its owner can write); from a read-only tier, a private copy of the verified
    bytes (nothing can swap it between the check and the load).
    """
    found = lookup_entry(key)
    if found is None:
        return None
    if not found.readonly:
        return found.path / LIBRARY
    fd, copy = tempfile.mkstemp(suffix=".so", dir=private_dir())
    with os.fdopen(fd, "wb") as fh:
        fh.write(found.files[LIBRARY])
    return Path(copy)


@contextlib.contextmanager
def build_lock(key: str) -> Iterator[bool]:
    """Hold the OS lock for ``key`` (blocks while another process builds it); yields
    False when no lock can be held (the build then goes on unlocked)."""
    with entry_lock(native_root(), key) as held:
        yield held


def publish(
    key: str, library: bytes, source: str, ext: str, meta: Mapping[str, Any]
) -> Path | None:
    """Publish a built library and its source; the library's path in the cache, or
    None when the cache cannot be written (the caller loads its own copy)."""
    files = {LIBRARY: library, f"source.{ext}": source.encode()}
    entry = publish_entry(SECTION, key, files, meta)
    if entry is None:
        return None
    apply_size_cap()
    return entry / LIBRARY


def clear_cache(name: str | None = None) -> int:
    """Delete compiled native modules: every one, or those built for module ``name``.

    Numba handlers and other files of the cache root are kept (``polykernel cache
    clear`` removes everything), and so is an entry another process is building.
    Modules already loaded in a process keep working.

    Returns:
        The number of compiled modules removed.

    Raises:
        KernelTypeError: ``name`` is neither a string nor None.

    Example:
        >>> from polykernel import clear_cache
        >>> clear_cache("no_such_module")
        0
    """
    import json

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
        if entry.name.startswith(".") or held_by_another(native, entry.name):
            continue  # being published or built right now
        if name is not None:
            try:
                raw, _ = read_regular(entry / "meta.json")  # never a FIFO's read
                built_for = json.loads(raw).get("name")
            except (OSError, ValueError, AttributeError):
                continue  # unreadable entry: not provably this module's
            if built_for != name:
                continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += not entry.exists()
    return removed
