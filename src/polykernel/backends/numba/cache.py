"""The Numba handler cache: an index from a target name to its artefact.

Layout under ``config.cache_root()`` (owner-only, see :mod:`polykernel.cache.store`)::

    numba/<key40>/handler.so    the handler, a shared object (or, where no C
                                compiler could link, handler.o: an object file
                                for Numba's JIT)
    numba/<key40>/meta.json     key, size and SHA-256 of the file, entry symbol,
                                format, the external symbols it needs, its
                                requirements (machine, CPU ISA, FFI layout)
    numba/locks/<key40>.lock    fcntl lock: N processes, one build

Entries are stored, verified (read-only tiers first) and published atomically by
:mod:`polykernel.cache.entries`; any fault is a miss.

The key (:func:`cache_key`) is computed without Numba, so a process that never
defined the kernel (or cannot import Numba) finds it by its name. It is a SHA-256
over named parts, each logged at DEBUG (logger ``polykernel.backends.numba.cache``):

- ``target``: the FFI target name, a digest of everything that decides the
  kernel's code: its content fingerprint (which holds the Python, Numba, NumPy and
  llvmlite versions and Numba's code-generation settings, :mod:`.fingerprint`),
  the signature, the label and the handler generator's version;
- ``generator``: the source of the modules that generate the handler's code;
- ``machine``, ``isa``: the architecture and the CPU's instruction-set extensions
  (the code is compiled for this CPU);
- ``ffi``: the XLA FFI layout digest (:func:`polykernel.ffi.artefact
  .ffi_layout_digest`);
- ``format``: this layout's version.

An entry's requirements are checked again before loading
(:func:`polykernel.ffi.artefact.problems`): an entry of a read-only tier may come
from another machine.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...cache.entries import (
    DAMAGED,
    META,
    STAGING,
    entry_fault,
    publish_entry,
    read_entry,
)
from ...cache.locks import entry_lock
from ...cache.store import compute_key
from ...ffi.artefact import installed_ffi_digest
from ...settings import paths as config

__all__ = [
    "OBJECT",
    "SHARED",
    "Found",
    "cache_key",
    "discard_entry",
    "ffi_digest",
    "find",
    "lock",
    "lookup",
    "numba_root",
    "publish",
]

log = logging.getLogger(__name__)
SECTION = "numba"
SHARED = "handler.so"
OBJECT = "handler.o"
_FORMAT = "2"  # 1: handler.o keyed with Numba's codegen
# Sources that generate a handler's code, relative to the package (read, not
# imported: a cache hit never needs them).
_GENERATOR_FILES = (
    "ffi/handler_ir/batch.py",
    "ffi/handler_ir/checks.py",
    "ffi/handler_ir/frame.py",
    "ffi/handler_ir/half.py",
    "ffi/handler_ir/handler.py",
    "ffi/handler_ir/pyerror.py",
    "ffi/handler_ir/scratch.py",
    "ffi/handler_ir/signature.py",
    "backends/numba/entry.py",
    "backends/numba/artifact.py",
    "backends/numba/compile.py",
    "backends/numba/rewrite.py",
    "backends/numba/shared.py",
)


@dataclass(frozen=True)
class Found:
    """A verified entry: its file (``handler.so`` or ``handler.o``) and record."""

    path: Path  # the file, in the cache (or a read-only tier)
    data: bytes
    meta: dict[str, Any]
    readonly: bool

    @property
    def shared(self) -> bool:
        return self.path.name == SHARED


def numba_root() -> Path:
    """``<cache root>/numba`` (not created)."""
    return config.cache_root() / "numba"


@functools.cache
def _generator_digest() -> str:
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[2]
    for name in _GENERATOR_FILES:
        h.update(name.encode() + b"\0" + (package / name).read_bytes())
    return h.hexdigest()


#: The FFI layout digest a handler generated here bakes in (one definition).
ffi_digest = installed_ffi_digest


def cache_key(target: str) -> str:
    """The cache key of the handler registered as ``target`` (see module doc)."""
    from ...ffi.artefact import host_isa, machine

    return compute_key(
        {
            "target": target,
            "generator": _generator_digest(),
            "machine": machine(),
            "isa": ",".join(sorted(host_isa() or ())),
            "ffi": ffi_digest(),
            "format": _FORMAT,
        },
        log,
    )


def find(target: str, *, discard: bool = False) -> Found | None:
    """The entry of handler ``target`` if it is valid and loadable here, else
    None (a miss); see :func:`lookup`."""
    found = lookup(cache_key(target), discard=discard)
    if found is not None and found.meta["entry"] != target:
        entry_fault(DAMAGED, f"'{found.path.parent / META}' is another handler's")
        return None
    return found


def lookup(key: str, *, discard: bool = False) -> Found | None:
    """The entry ``key`` if it is valid and loadable here, else None (a miss):
    read-only tiers first, everything verified (:mod:`polykernel.cache.entries`),
    then its requirements. ``discard``: remove an entry of the writable root that
    is not (the caller holds the build lock and rebuilds it; a published entry is
    never replaced otherwise)."""
    from ...ffi.artefact import Requirements, problems

    found = read_entry(SECTION, key)
    if found is None:
        return None
    names = [n for n in (SHARED, OBJECT) if n in found.files]
    meta = found.meta
    if len(names) != 1 or not _well_formed(meta):
        # hand-edited or written by something else
        entry_fault(DAMAGED, f"'{found.path / META}' lacks a Numba handler's fields")
        if discard and not found.readonly:
            discard_entry(found.path)
        return None
    req = meta["requires"]
    why = problems(
        Requirements.from_json(req), ffi=ffi_digest(),
    )
    if why:
        log.debug("numba handler %s cannot load here: %s", meta["entry"], why)
        if discard and not found.readonly:
            discard_entry(found.path)
        return None
    name = names[0]
    return Found(found.path / name, found.files[name], meta, found.readonly)


def discard_entry(entry: Path) -> None:
    """Remove the entry folder ``entry`` of the writable root (renamed aside
    first, as :mod:`polykernel.cache.entries` replaces a stale entry, so no
    reader sees it half-removed)."""
    aside = entry.with_name(f"{STAGING}{entry.name}-unusable-{os.getpid()}")
    try:
        os.rename(entry, aside)
    except OSError as err:
        log.debug("cannot remove the cache entry %s: %s", entry, err)
        return
    shutil.rmtree(aside, ignore_errors=True)


def _well_formed(meta: Any) -> bool:
    """The fields the loader reads exist with the right types."""
    if not isinstance(meta, dict):
        return False
    req = meta.get("requires")
    return (
        isinstance(meta.get("entry"), str)
        and isinstance(meta.get("externals"), list)
        and all(isinstance(e, str) for e in meta["externals"])
        and isinstance(meta.get("environments", []), list)
        and all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(s, str) for s in e)
            for e in meta.get("environments", [])
        )
        and isinstance(req, dict)
        and isinstance(req.get("machine"), str)
        and isinstance(req.get("isa"), list)
        and all(isinstance(f, str) for f in req["isa"])
        and isinstance(req.get("ffi"), str)
        and isinstance(req.get("runtime"), bool)
    )


def lock(target: str) -> contextlib.AbstractContextManager[bool]:
    """Context manager: the entry's cross-process build lock (never fails a build)."""
    return entry_lock(numba_root(), cache_key(target))


def publish(target: str, name: str, data: bytes, meta: dict) -> Path | None:
    """Publish the handler file ``name`` (:data:`SHARED` or :data:`OBJECT`) and
    its ``meta`` atomically; apply the size cap. The published file, or None when
    the cache cannot be written (the handler still runs from a private copy)."""
    from ...cache.admin import apply_size_cap  # only when writing (costly import)

    entry = publish_entry(SECTION, cache_key(target), {name: data}, meta)
    if entry is None:
        return None
    apply_size_cap()
    return entry / name
