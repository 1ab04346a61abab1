"""Cache entries: the one way artefacts are stored in, and read from, every cache tier.

Every cache section (native libraries, Numba handlers, Warp objects, GPU kernels,
callable names) keeps its artefacts as *entries*, ``<root>/<section>/<key40>/``: a few
files plus ``meta.json``, which records the entry's key and each file's size and
SHA-256. This module is the only one that writes or reads them, so every rule holds
for all of them:

- **Tiers.** :func:`read_entry` looks in the read-only tiers first
  (``$POLYKERNEL_CACHE_READONLY``: a site-wide or CI-built cache, never written),
  then in the writable root. Every entry is verified before it is used — its key,
  every file's size and checksum, that each is a regular file (a FIFO is never
  read), and (writable root) owner-only permissions — and anything else is a miss:
  silent when the entry is absent, else (half-written, damaged, foreign, unreadable)
  one :class:`~polykernel.errors.CacheWarning` per cause and process.
- **Atomic publication.** :func:`publish_entry` writes the whole entry into a private
  staging folder next to it, then renames that folder into place in one step. Two
  builders of one key (even without working file locks) never mix their files: the
  first rename wins and the second builder's folder is dropped.
- **Never a point of failure.** A cache that cannot be written (no space, permission
  denied, read-only filesystem, the root is a file...) makes :func:`publish_entry`
  return None after one :class:`~polykernel.errors.CacheWarning` naming the cause;
  the caller runs what it built without the cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CacheError
from ..settings import paths as config
from .store import (
    KEY_CHARS,
    REBUILT,
    cache_problem,
    check_private_file,
    describe,
    ensure_dir,
    read_regular,
    readonly_roots,
)

__all__ = [
    "DAMAGED",
    "FOREIGN",
    "HALF_WRITTEN",
    "META",
    "STAGING",
    "Entry",
    "entry_fault",
    "entry_path",
    "publish_entry",
    "read_entry",
]

log = logging.getLogger(__name__)
#: The name of an entry's record, written with the entry and read first.
META = "meta.json"
#: Prefix of the staging folders of entries being published (``cache_admin`` skips
#: them while their builder holds the lock).
STAGING = ".staging-"


@dataclass(frozen=True)
class Entry:
    """A verified cache entry.

    Attributes:
        path: the entry's folder.
        files: every recorded file's bytes, by name.
        meta: its ``meta.json`` (``key``, ``files`` and the section's fields).
        readonly: it lies in a read-only tier (load a private copy of any code).
    """

    path: Path
    files: dict[str, bytes]
    meta: dict[str, Any]
    readonly: bool


def entry_path(section: str, key: str, root: Path | None = None) -> Path:
    """``<root>/<section>/<key40>`` (not created); ``root``: the writable root."""
    return (root or config.cache_root()) / section / key[:KEY_CHARS]


def read_entry(section: str, key: str) -> Entry | None:
    """The entry ``key`` of ``section``: from a read-only tier, else the writable
    root; verified, or None (a miss)."""
    for root in readonly_roots():
        found = _read(entry_path(section, key, root), key, readonly=True)
        if found is not None:
            return found
    return _read(entry_path(section, key), key, readonly=False)


#: The causes of the faults of an entry that was read (one ``CacheWarning`` each).
HALF_WRITTEN = "a half-written cache entry"
DAMAGED = "a damaged cache entry"
FOREIGN = "a cache entry of another key"


def entry_fault(cause: str, detail: str) -> None:
    """Report a fault of an entry that was read (a miss, rebuilt): one
    ``CacheWarning`` per ``cause`` and process, then INFO log lines."""
    log.debug("polykernel cache: %s: %s; a miss", cause, detail)
    cache_problem(cause, detail, REBUILT)


def _read(entry: Path, key: str, readonly: bool) -> Entry | None:
    meta_path = entry / META
    try:
        raw, _ = read_regular(meta_path)
        meta = json.loads(raw)
    except FileNotFoundError:
        if os.path.lexists(entry):  # a folder without its record: never published
            entry_fault(HALF_WRITTEN, f"'{entry}' has no {META}")
        return None
    except ValueError as err:
        entry_fault(DAMAGED, f"'{meta_path}' is not JSON ({err})")
        return None
    except OSError as err:
        entry_fault(describe(err), f"cannot read '{meta_path}' ({err})")
        return None
    listing = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(listing, dict):
        entry_fault(DAMAGED, f"'{meta_path}' is not an entry's record")
        return None
    if meta.get("key") != key:
        entry_fault(FOREIGN, f"'{meta_path}' does not record key {key[:12]}")
        return None
    try:
        return _verified(entry, key, meta, listing, readonly)
    except (AttributeError, TypeError) as err:
        entry_fault(DAMAGED, f"'{meta_path}' lists its files wrongly ({err})")
    except FileNotFoundError as err:
        if os.path.lexists(meta_path):  # else removed meanwhile (prune): a miss
            entry_fault(DAMAGED, f"a file of '{entry}' is missing ({err})")
    except (OSError, CacheError) as err:  # CacheError: others may write it
        entry_fault(describe(err), f"cannot use '{entry}' ({err})")
    return None


def _verified(
    entry: Path, key: str, meta: dict, listing: dict, readonly: bool
) -> Entry | None:
    """Every listed file of ``entry``, read and checked; None when one is damaged.

    Raises:
        OSError, CacheError: a file cannot be read, is not a regular file, or
            (writable root) others may write it or its folders.
        AttributeError, TypeError: the listing is not of sizes and checksums.
    """
    if not readonly:
        for directory in (config.cache_root(), entry.parent, entry):
            config.ensure_private_dir(directory)  # refuses dirs others can write
    files = {}
    for name, expected in listing.items():
        path = entry / name
        data, st = read_regular(path)
        if not readonly:
            check_private_file(path, st)
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != expected.get("size") or digest != expected.get("sha256"):
            entry_fault(DAMAGED, f"'{path}' does not match its size and checksum")
            return None
        files[name] = data
    if not readonly:
        with contextlib.suppress(OSError):
            os.utime(entry / META)  # last use, for prune()
    return Entry(entry, files, meta, readonly)


def publish_entry(
    section: str, key: str, files: Mapping[str, bytes], meta: Mapping[str, Any]
) -> Path | None:
    """Publish ``files`` with ``meta.json`` as entry ``key`` of ``section``,
    atomically; the entry's folder, or None when the cache cannot be written.

    An entry already published under ``key`` (by another process) is kept: the
    key names the content, so either copy serves.
    """
    entry = entry_path(section, key)
    staging = None
    try:
        parent = ensure_dir(entry.parent)
        staging = Path(tempfile.mkdtemp(prefix=f"{STAGING}{key[:KEY_CHARS]}-",
                                        dir=parent))  # fmt: skip
        os.chmod(staging, 0o700)
        listing = {}
        for name, data in files.items():
            (staging / name).write_bytes(data)
            os.chmod(staging / name, 0o600)
            digest = hashlib.sha256(data).hexdigest()
            listing[name] = {"size": len(data), "sha256": digest}
        record = {**meta, "key": key, "files": listing, "time": time.time()}
        (staging / META).write_text(json.dumps(record, indent=1))
        os.chmod(staging / META, 0o600)
        if not _rename_into_place(staging, entry, key):
            return entry  # another builder published this key first: keep theirs
        staging = None
    except (OSError, CacheError) as err:
        cache_problem(describe(err), f"cannot publish a {section} entry")
        return None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return entry


def _rename_into_place(staging: Path, entry: Path, key: str) -> bool:
    """Rename ``staging`` to ``entry``; False when a valid entry is already there.

    An invalid folder in the way (a half-written or foreign entry, an older layout)
    is moved aside first, then removed.
    """
    try:
        os.rename(staging, entry)
        return True
    except OSError:
        if not entry.exists():
            raise
    if _read(entry, key, readonly=False) is not None:
        return False
    aside = entry.with_name(f"{STAGING}{entry.name}-stale-{os.getpid()}")
    with contextlib.suppress(OSError):
        os.rename(entry, aside)
    if aside.is_dir() and not aside.is_symlink():
        shutil.rmtree(aside, ignore_errors=True)
    else:  # a file (or a link) in the way of the entry
        with contextlib.suppress(OSError):
            aside.unlink()
    os.rename(staging, entry)
    return True
