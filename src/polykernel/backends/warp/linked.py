"""A Warp CPU kernel as one shared object: its handler linked with Warp's object.

At build time (:func:`build`), the handler's LLVM IR
(:func:`.cpu_handler.handler_module`) calls Warp's entry point by symbol name; it
is emitted as an object file with llvmlite for the host and linked by
:func:`polykernel.native.link.link_shared` with the object Warp built for the
kernel's module (self-contained: it leaves only ``_GLOBAL_OFFSET_TABLE_`` to the
linker). Only the handler (named like its target) is exported: every Warp symbol
is local, so two kernels' builds never clash in one process. The shared object is
kept in the cache (:mod:`.cache`) with its requirements.

Loading it (:func:`load`) needs :mod:`ctypes` and nothing else: no Warp, no
llvmlite, no process. What the handler calls besides Warp's code (the CPython C
API on its error path, libc, libm) is resolved by name by the dynamic loader from
the running process, as for any extension module; the C-API functions it calls
belong to the stable ABI, so a build made under one CPython loads in another.
The requirements are checked first: a mismatch or a damaged entry is a miss
(the caller builds again), never a crash.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ...errors import KernelLoadError
from ...ffi import targets
from ...ffi.artefact import installed_ffi_digest
from .cache import LIBRARY, Saved, read_linked, save_linked
from .cpu_handler import register_cpu
from .names import target_for

__all__ = ["build", "ffi_digest", "key", "load"]

log = logging.getLogger(__name__)
_lock = threading.Lock()


#: The FFI layout digest a handler generated here bakes in (one definition).
ffi_digest = installed_ffi_digest


@functools.cache
def _environment() -> str:
    from ...ffi.artefact import machine

    # What must match exactly (an ISA may be a superset: problems() decides), so a
    # process under another jaxlib or on another architecture finds its own build.
    data = json.dumps([machine(), ffi_digest()])
    return hashlib.sha256(data.encode()).hexdigest()[:7]


def key(target: str) -> str:
    """The cache entry of ``target``'s linked handler in this environment."""
    return f"{target}-{_environment()}"


def load(target: str) -> bool:
    """Register ``target`` from its linked handler in the cache; False on a miss
    (none, damaged, stored under a name its parts do not hash to, or built for
    what this machine or jaxlib is not)."""
    from ...ffi.artefact import problems

    if targets.lookup(target, "cpu") is not None:
        return True
    saved = read_linked(key(target))
    if saved is None:
        return False
    if not _names_match(saved, target):
        log.debug("warp: the entry of %s is another target's; a miss", target)
        return False
    requires = saved.requires()
    found = problems(requires, ffi=ffi_digest())
    if found:
        log.debug("warp: cannot load %s here (%s); a miss", target, found)
        return False
    path = saved.path / LIBRARY
    if saved.readonly:  # a private copy: nothing can swap it before the load
        path = _private_copy(saved.object, target)
    sha256 = saved.meta["files"][LIBRARY]["sha256"]
    try:
        return _register(target, path, sha256, requires, saved.label, "")
    except KernelLoadError as err:  # its checksum held, yet it is no library
        from ...cache.entries import DAMAGED, entry_fault

        entry_fault(DAMAGED, f"'{path}' does not load ({err})")
        return False


def _names_match(saved: Saved, target: str) -> bool:
    name = target_for(saved.digest, saved.name, saved.sig, saved.launch, saved.warp)
    return saved.target == target and name == target


def _private_copy(data: bytes, target: str) -> Path:
    from ...native.cache import private_dir

    handle, path = tempfile.mkstemp(
        prefix=f"{target}-", suffix=".so", dir=private_dir()
    )
    with open(handle, "wb") as out:
        out.write(data)
    return Path(path)


def _register(
    target: str, path: Path, sha256: str, requires: Any, label: str, note: str
) -> bool:
    """Load the shared object at ``path`` and register its handler.

    Raises:
        KernelLoadError: the loader refuses it, or it lacks the handler.
    """
    from ...ffi.artefact import Artefact, load_library, symbol_address

    with _lock:
        if targets.lookup(target, "cpu") is not None:
            return True
        library = load_library(path)
        address = symbol_address(library, target)
        artefact = Artefact(target, "warp", str(path), target, sha256, requires,
                            label=label)  # fmt: skip
        register_cpu(target, address, label, library, note, artefact)
        return True


def build(target: str, parts: dict[str, Any], warp_object: bytes) -> bool:
    """Link ``target``'s handler with ``warp_object``, keep it in the cache, load
    and register it. False when the linked library does not load (the caller
    falls back to the JIT-compiled handler).

    ``parts``: as for :func:`.cache.save` (``launch``, ``entry``, ``plan``,
    ``sig``, ``label`` and the name's parts).

    Raises:
        HostCompilerNotFoundError: no C compiler can link here.
        CompilationError: the link failed.
        BackendUnavailableError: llvmlite is not installed.
    """
    from ...ffi.artefact import Requirements
    from ...native.cache import private_dir
    from ...native.link import find_linker, link_shared

    find_linker()  # before any work: without one the caller takes the JIT path
    handler = _handler_object(target, parts)
    with tempfile.TemporaryDirectory(prefix="pk-warp-", dir=private_dir()) as tmp:
        out = link_shared([handler, warp_object], Path(tmp) / LIBRARY,
                          flags=_export_only(target, Path(tmp)))  # fmt: skip
        data = out.read_bytes()
    sha256 = hashlib.sha256(data).hexdigest()
    requires = Requirements.here(ffi=ffi_digest())
    entry = save_linked(key(target), target, parts, data, requires)
    path = None if entry is None else entry / LIBRARY
    if path is None or _sha256(path) != sha256:
        # Not cached, or another process published its build of this key first
        # (the same content; this one is loaded from a private copy).
        path = _private_copy(data, target)
    note = "" if entry is not None else (
        "the cache holds no copy of its shared object (it could not be written); "
        "define the kernel in that process"
    )  # fmt: skip
    try:
        return _register(target, path, sha256, requires, parts["label"], note)
    except KernelLoadError as err:
        log.warning("warp: the linked handler of %s does not load: %s", target, err)
        return False


def _sha256(path: Path) -> str:
    from ...ffi.artefact import file_sha256

    try:
        return file_sha256(path)
    except OSError:
        return ""


def _handler_object(target: str, parts: dict[str, Any]) -> bytes:
    """The handler of ``target`` as a position-independent object for this host,
    calling Warp's entry by name."""
    from .cpu_handler import handler_module, llvm

    binding = llvm()
    tm = binding.Target.from_default_triple().create_target_machine(
        opt=2, reloc="pic", codemodel="default"
    )
    module = handler_module(tm, target, parts["sig"], parts["label"], parts["plan"],
                            parts["entry"], parts["launch"])  # fmt: skip
    return tm.emit_object(module)


def _export_only(symbol: str, folder: Path) -> list[str]:
    """Linker flags exporting only ``symbol`` (and naming libm, which Warp's math
    may call)."""
    if sys.platform == "darwin":  # Mach-O names start with "_"; Python is found late
        return [f"-Wl,-exported_symbol,_{symbol}", "-Wl,-undefined,dynamic_lookup"]
    script = folder / "exports.map"
    script.write_text(f"{{ global: {symbol}; local: *; }};\n")
    return [f"-Wl,--version-script={script}", "-lm"]
