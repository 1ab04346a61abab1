"""The Numba handler cache: its key and its files (nothing else knows either).

Layout under ``config.cache_root()`` (owner-only, see :mod:`polykernel.cache.store`)::

    numba/<key40>/handler.o     the self-contained handler object (ELF/Mach-O)
    numba/<key40>/meta.json     key, size and SHA-256 of handler.o, entry symbol,
                                the external symbols it needs
    numba/locks/<key40>.lock    fcntl lock: N processes, one build

Entries are stored, verified (read-only tiers first) and published atomically by
:mod:`polykernel.cache.entries`; any fault is a miss.

The key (:func:`cache_key`) is a SHA-256 over named parts, each logged at DEBUG
(logger ``polykernel.backends.numba.cache``):

- ``target``: the FFI target name, itself a digest of the kernel's content
  fingerprint (:mod:`.fingerprint`), the signature, the kernel's
  label and the handler generator's version (see :func:`target_parts`);
- ``generator``: the source of the modules that generate the handler's code;
- ``versions``: Python, NumPy, Numba, llvmlite and LLVM versions;
- ``machine``: the JIT's target triple, CPU name and CPU features, and the Numba
  settings that change generated code;
- ``ffi``: the XLA FFI API version and every struct offset the handler uses.

"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import platform
import sys
from pathlib import Path
from typing import Any

from ...cache.admin import apply_size_cap
from ...cache.entries import DAMAGED, META, entry_fault, publish_entry, read_entry
from ...cache.locks import entry_lock
from ...cache.store import compute_key
from ...settings import paths as config

__all__ = ["cache_key", "lock", "lookup", "numba_root", "publish"]

log = logging.getLogger(__name__)
SECTION = "numba"
OBJECT = "handler.o"
# Numba settings read while compiling that change the machine code.
_NUMBA_SETTINGS = (
    "OPT", "LOOP_VECTORIZE", "SLP_VECTORIZE", "BOUNDSCHECK", "FASTMATH",
    "ENABLE_AVX", "CPU_NAME", "CPU_FEATURES", "DEBUGINFO_DEFAULT",
    "LLVM_REFPRUNE_PASS", "USE_RVSDG_FRONTEND", "CAPTURED_ERRORS",
)  # fmt: skip
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
)


def numba_root() -> Path:
    """``<cache root>/numba`` (not created)."""
    return config.cache_root() / "numba"


def entry_dir(key: str) -> Path:
    return numba_root() / key[:40]


@functools.cache
def _generator_digest() -> str:
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[2]
    for name in _GENERATOR_FILES:
        h.update(name.encode() + b"\0" + (package / name).read_bytes())
    return h.hexdigest()


def _abi_constants() -> str:
    from ...ffi import abi

    # Every fact a handler bakes in: the installed FFI API version, its struct layout
    # and the handshake/dtype constants. Not vars(abi): layout names are resolved
    # lazily into the module's globals, so its contents depend on what ran before.
    values = {
        "installed_api_version": list(abi.installed_api_version()),
        "layout": abi.layout(),
        "handshake": [abi.API_MAJOR, abi.API_MINOR],
        "dtype_codes": abi.DTYPE_CODES,
        "constants": {
            name: getattr(abi, name)
            for name in (
                "STAGE_EXECUTE",
                "EXT_TYPE_METADATA",
                "ATTR_TYPE_SCALAR",
                "ERRC_INVALID_ARGUMENT",
                "ERRC_INTERNAL",
            )
        },
    }
    return json.dumps(values, sort_keys=True)


def _versions() -> str:
    import llvmlite
    import llvmlite.binding as ll
    import numba
    import numpy

    return json.dumps(
        [platform.python_implementation(), sys.version, numpy.__version__,
         numba.__version__, llvmlite.__version__, list(ll.llvm_version_info)]
    )  # fmt: skip


def _machine(codegen: Any) -> str:
    from numba.core import config

    settings = {n: repr(getattr(config, n, None)) for n in _NUMBA_SETTINGS}
    return json.dumps([list(map(str, codegen.magic_tuple())), settings])


def cache_key(target: str, codegen: Any) -> str:
    """The cache key of the handler registered as ``target`` (see module doc)."""
    return compute_key(
        {
            "target": target,
            "generator": _generator_digest(),
            "versions": _versions(),
            "machine": _machine(codegen),
            "ffi": _abi_constants(),
        },
        log,
    )


def lookup(key: str) -> tuple[bytes, dict] | None:
    """``(object bytes, meta)`` of a valid entry for ``key``, or None (a miss):
    read-only tiers first, everything verified (:mod:`polykernel.cache.entries`)."""
    found = read_entry(SECTION, key)
    if found is None or OBJECT not in found.files:
        return None
    if not _well_formed(found.meta):  # hand-edited or written by something else
        entry_fault(DAMAGED, f"'{found.path / META}' lacks a Numba handler's fields")
        return None
    return found.files[OBJECT], found.meta


def _well_formed(meta: Any) -> bool:
    """The fields the loader reads exist with the right types."""
    return (
        isinstance(meta, dict)
        and isinstance(meta.get("entry"), str)
        and isinstance(meta.get("externals"), list)
        and all(isinstance(e, str) for e in meta["externals"])
        and isinstance(meta.get("environments", []), list)
        and all(isinstance(e, list) for e in meta.get("environments", []))
    )


def lock(key: str) -> contextlib.AbstractContextManager[bool]:
    """Context manager: the entry's cross-process build lock (never fails a build)."""
    return entry_lock(numba_root(), key)


def publish(key: str, obj: bytes, meta: dict) -> bool:
    """Publish the object and its ``meta`` atomically; apply the size cap. False
    when the cache cannot be written (the handler still runs from memory)."""
    if publish_entry(SECTION, key, {OBJECT: obj}, meta) is None:
        return False
    apply_size_cap()
    return True
