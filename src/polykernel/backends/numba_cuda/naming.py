"""Names of ``numba_cuda_callable`` handlers: the same in every process where they
can be.

A callable's CUDA handler runs the user's Python function; its FFI target is named
after that function: a module-level function by its module, qualified name and code
(a new process finds it again by name, once its module is imported: :mod:`.revive`),
anything else (a closure, a lambda, a method) by a token of this process.
:func:`save_note` keeps the module and name of a portable one in the cache (section
``numba_cuda``), since the target name itself is a digest.
"""

from __future__ import annotations

import hashlib
import marshal
import threading
import types
import uuid
import weakref
from typing import Any

from ...cache.entries import entry_path, publish_entry, read_entry

__all__ = [
    "SECTION",
    "TARGET_PATTERN",
    "callable_target",
    "importable",
    "read_note",
    "save_note",
]

#: Names of the targets of ``numba_cuda_callable`` functions.
TARGET_PATTERN = r"pk_ncc_[0-9a-f]{24}"
#: The cache section holding the names of callables.
SECTION = "numba_cuda"
_lock = threading.Lock()
# Functions polykernel cannot name across processes (closures, locals) get a
# per-process token; weak keys, so a new function never inherits a dead one's.
_local_tokens: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def importable(fn: Any) -> bool:
    """Whether a new process finds ``fn`` again by module and qualified name."""
    # A plain function only: a bound method carries its instance (two instances'
    # methods share module, name and code), a closure its cells.
    return (
        isinstance(fn, types.FunctionType)
        and fn.__closure__ is None
        and "<" not in fn.__qualname__
        and fn.__module__ not in (None, "__main__")
    )


def callable_target(fn: Any) -> tuple[str, bool]:
    """The FFI target name of ``fn``'s handler and whether it is portable.

    A module-level function is named by its module, qualified name and code, the
    same in every process; anything else (a closure, a lambda, a method) by a token
    of this process.
    """
    h = hashlib.sha256()
    if importable(fn):
        h.update(f"{fn.__module__}\0{fn.__qualname__}\0".encode())
        h.update(marshal.dumps(fn.__code__))
        portable = True
    else:
        with _lock:
            try:
                token = _local_tokens.setdefault(fn, uuid.uuid4().hex)
            except TypeError:  # not weak-referenceable: one token per wrapper call
                token = uuid.uuid4().hex
        h.update(f"local:{token}".encode())
        portable = False
    return f"pk_ncc_{h.hexdigest()[:24]}", portable


def save_note(target: str, fn: Any) -> bool:
    """Note ``fn``'s module and qualified name for ``target`` (best effort)."""
    if (entry_path(SECTION, target) / "meta.json").exists():
        return True
    meta = {"module": fn.__module__, "qualname": fn.__qualname__}
    return publish_entry(SECTION, target, {}, meta) is not None


def read_note(target: str) -> tuple[str, str] | None:
    """``(module, qualified name)`` noted for ``target``, or None."""
    found = read_entry(SECTION, target)
    if found is None:
        return None
    meta = found.meta
    return str(meta.get("module")), str(meta.get("qualname"))
