"""Open a bundle's libraries without leaving files behind.

On Linux each library is written to an anonymous in-memory file (``memfd``) and
opened through ``/proc/self/fd``: nothing is written to disk and nothing needs
cleaning up. Elsewhere it is written, named by its SHA-256, under a private
folder of the cache (``bundles/``), where a second load reuses it.
"""

from __future__ import annotations

import ctypes
import os
import threading

from ..ffi.artefact import load_library

__all__ = ["open_library"]

_lock = threading.Lock()
_opened: dict[str, ctypes.CDLL] = {}  # SHA-256 -> library: one copy per process


def open_library(
    data: bytes, name: str, digest: str, *, shared: bool = False
) -> ctypes.CDLL:
    """Open the shared object ``data`` whose SHA-256 (verified by the reader) is
    ``digest`` (``shared``: its symbols resolve later libraries', for the runtime
    library)."""
    with _lock:
        if digest in _opened:
            return _opened[digest]
        if hasattr(os, "memfd_create"):
            # The file stays open for the process: a closed descriptor's number is
            # reused, and the loader would take the next library's path for this
            # one's and hand this one back.
            fd = os.memfd_create(f"pk-{os.path.basename(name)}", 0)
            os.write(fd, data)
            library = load_library(f"/proc/self/fd/{fd}", shared=shared)
        else:
            library = load_library(_on_disk(digest, data), shared=shared)
        _opened[digest] = library
        return library


def _on_disk(digest: str, data: bytes) -> str:
    from ..settings.paths import cache_root

    folder = cache_root() / "bundles"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{digest[:32]}.so"
    if not path.exists():
        staged = path.with_suffix(f".{os.getpid()}.tmp")
        staged.write_bytes(data)
        os.replace(staged, path)
    return str(path)
