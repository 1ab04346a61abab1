"""One JSON file of the config directory, shared by processes: read, lock, write.

``defaults.json`` (tuned default backends) and ``tuned.json`` (tuned dispatch) follow
the same discipline: every read-modify-write holds an exclusive OS lock (``flock`` on
the config directory itself, so no lock file is left beside them) and the file is
replaced atomically (a temporary file in the same directory, then ``os.replace``), so
two processes writing at once each see the other's entries and nothing is lost or
half-written. Nothing is created before the first write.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .paths import ensure_private_dir

__all__ = ["locked", "read_text", "write_json"]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the cross-process lock of ``path``'s directory (blocks while another
    process holds it); the directory is created, owner-only, if needed."""
    directory = path.parent
    ensure_private_dir(directory)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist (other errors propagate)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def write_json(path: Path, data: Any) -> Path:
    """Write ``data`` to ``path`` atomically (call it while holding :func:`locked`)."""
    ensure_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
