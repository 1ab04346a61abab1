"""Small verified cache entries: a few files plus ``meta.json``, written last.

What a backend keeps so that a new process can register a target it never built
(a Warp CPU object, a GPU kernel's images and launch spec) is stored as an entry of
:mod:`polykernel.cache_store`'s layout, ``<root>/<section>/<key40>/``:

- every file is written atomically, then ``meta.json`` records each file's size and
  SHA-256 and the entry's key — an entry without it is not there yet;
- :func:`read_entry` verifies all of it (key, sizes, checksums, owner-only
  permissions) and treats any mismatch, or any error reading, as a miss;
- writing is best effort: :func:`publish_entry` returns False instead of raising
  when the cache cannot be written (a cache is a speed-up, never a point of failure).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import config
from .cache_store import KEY_CHARS, atomic_write, check_private_file, ensure_dir
from .errors import CacheError

__all__ = ["entry_path", "publish_entry", "read_entry"]

log = logging.getLogger(__name__)
_META = "meta.json"


def entry_path(section: str, key: str) -> Path:
    """``<root>/<section>/<key40>`` (not created)."""
    return config.cache_root() / section / key[:KEY_CHARS]


def publish_entry(
    section: str, key: str, files: Mapping[str, bytes], meta: Mapping[str, Any]
) -> bool:
    """Write ``files`` and then ``meta.json`` as the entry ``key`` of ``section``.

    Returns False (and logs why at WARNING) when the cache cannot be written.
    """
    try:
        entry = ensure_dir(entry_path(section, key))
        listing = {}
        for name, data in files.items():
            atomic_write(entry / name, data)
            os.chmod(entry / name, 0o600)
            digest = hashlib.sha256(data).hexdigest()
            listing[name] = {"size": len(data), "sha256": digest}
        record = {**meta, "key": key, "files": listing, "time": time.time()}
        atomic_write(entry / _META, json.dumps(record, indent=1).encode())
        return True
    except (OSError, CacheError) as err:
        log.warning("polykernel cache: cannot write %s entry %s: %s", section,
                    key[:12], err)  # fmt: skip
        return False


def read_entry(section: str, key: str) -> tuple[dict[str, bytes], dict] | None:
    """The files and ``meta.json`` of entry ``key``, verified; None on any miss."""
    entry = entry_path(section, key)
    try:
        meta = json.loads((entry / _META).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        log.warning("polykernel cache: unreadable %s: %s", entry / _META, err)
        return None
    listing = meta.get("files") if isinstance(meta, dict) else None
    if meta.get("key") != key or not isinstance(listing, dict):
        return None
    files = {}
    try:
        for name, expected in listing.items():
            path = entry / name
            st = path.stat()
            check_private_file(path, st)
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if len(data) != expected.get("size") or digest != expected.get("sha256"):
                log.warning("polykernel cache: %s is corrupt; ignoring it", path)
                return None
            files[name] = data
    except (OSError, AttributeError, TypeError) as err:
        log.warning("polykernel cache: cannot read %s: %s", entry, err)
        return None
    with contextlib.suppress(OSError):
        os.utime(entry / _META)  # last use, for prune()
    return files, meta
