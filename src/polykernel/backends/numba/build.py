"""Get the handler for (kernel, signature): from the disk cache, or build it.

Build (cold path): compile the kernel for the signature (:mod:`.compile`),
generate the handler as LLVM IR around a call to it (``ffi.handler_ir`` +
:mod:`.entry`), link both into one module with only the handler exported and
prove it self-contained (:mod:`.artifact`), emit its object code, publish that
(:mod:`.cache`) and load it. Hit: check and load the cached object; no Numba
compilation at all.

Not cached (reason at DEBUG, logger ``polykernel.backends.numba.build``): a
kernel that cannot be fingerprinted by content, or whose linked code depends on
this process (dynamic globals, a Numba environment holding constants, code Numba
loaded from its own disk cache, ...). The former still runs the linked artefact;
the latter a handler whose kernel symbol resolves to the kernel compiled in this
process, like any Numba call.

Numba's threading layer is made thread-safe on first use (never at import): XLA
may run handlers on several threads at once, which aborts the process under
``workqueue``.
"""

from __future__ import annotations

import importlib
import logging
import threading
import types as pytypes
from dataclasses import dataclass
from typing import Any

from ...errors import BackendUnavailableError, KernelRegistrationError
from ...ffi import targets
from ...ffi.handler_ir.signature import Signature

__all__ = [
    "Handler",
    "build_handler",
    "check_parallel_layer",
    "import_numba",
    "load_cached_handler",
    "loaded_handler",
]

log = logging.getLogger(__name__)
_lock = threading.RLock()
_handlers: dict[str, Handler] = {}
_SAFE_LAYERS = ("omp", "tbb", "threadsafe", "safe", "forksafe")
# A handler object that needs one of these runs a parallel (prange) kernel.
_PARALLEL_SYMBOLS = frozenset({"numba_parallel_for", "get_num_threads"})


@dataclass
class Handler:
    """A loaded handler: its entry address, owner and how it was obtained."""

    target: str
    address: int
    library: Any
    # "disk" (cache hit), "built" (and cached), "unpublished" (the cache could not
    # be written), "uncached" (its code depends on this process)
    origin: str
    label: str = ""
    # No content fingerprint: the target name holds a per-process token.
    process_local: bool = False


def import_numba() -> pytypes.ModuleType:
    """Import Numba (once) and make its threading layer safe for XLA's threads.

    Raises:
        BackendUnavailableError: Numba is not installed.
    """
    try:
        import numba
    except ImportError as err:
        raise BackendUnavailableError(
            "polykernel numba backend: the 'numba' package is not installed. "
            'Install it with: pip install "polykernel[numba]"'
        ) from err
    _configure_threading(numba)
    return numba


def _configure_threading(numba: pytypes.ModuleType) -> None:
    from numba.np.ufunc import parallel

    if parallel._is_initialized or numba.config.THREADING_LAYER != "default":
        return
    # "default" may pick workqueue, which is not thread-safe; "threadsafe" picks tbb
    # or omp, so use it whenever one of them loads.
    for module in ("numba.np.ufunc.omppool", "numba.np.ufunc.tbbpool"):
        try:
            importlib.import_module(module)
        except ImportError:
            continue
        numba.config.THREADING_LAYER = "threadsafe"
        return


def check_parallel_layer(numba: pytypes.ModuleType, kernel_name: str) -> None:
    """Refuse a ``parallel=True`` kernel when only ``workqueue`` can run it.

    Raises:
        KernelRegistrationError: the threading layer is (or will be) workqueue.
    """
    from numba.np.ufunc import parallel

    layer = (
        numba.threading_layer()
        if parallel._is_initialized
        else numba.config.THREADING_LAYER
    )
    if layer in _SAFE_LAYERS:
        return
    raise KernelRegistrationError(
        f"polykernel numba_kernel '{kernel_name}': a parallel=True kernel needs a "
        f"thread-safe Numba threading layer (XLA calls handlers from several "
        f"threads), but the layer is '{layer}'. Set NUMBA_THREADING_LAYER=omp (or "
        f"tbb) before the first parallel Numba call, and install tbb or an OpenMP "
        f"runtime if neither loads."
    )


def _codegen() -> tuple[Any, Any]:
    from numba.core.registry import cpu_target

    # also starts Numba's runtime (NRT); Numba's cached property is untyped
    context: Any = cpu_target.target_context
    return context, context.codegen()


def build_handler(
    target: str, sig: Signature, label: str, kernel: Any, cacheable: bool, private: dict
) -> Handler:
    """Load (or build, cache and load) the handler ``target`` and register it.

    ``cacheable`` is False when the kernel has no content fingerprint; ``private``
    holds the kernel's private (disk-cache free) dispatcher copies.
    """
    from . import cache as handler_cache

    with _lock:
        handler = _handlers.get(target)
        if handler is not None:
            return handler
        context, codegen = _codegen()
        if cacheable:
            key = handler_cache.cache_key(target, codegen)
            handler = _from_disk(key, target, context)
            if handler is None:
                with handler_cache.lock(key):  # one build across processes
                    handler = _from_disk(key, target, context)
                    if handler is None:
                        handler = _build(context, target, sig, label, kernel,
                                         private, key)  # fmt: skip
        else:
            log.debug("numba_kernel '%s': not cached (no content fingerprint)", label)
            handler = _build(context, target, sig, label, kernel, private, None)
            handler.process_local = True
        handler.label = label
        _register(handler)
        _handlers[target] = handler
        return handler


def loaded_handler(target: str) -> Handler | None:
    """The handler registered as ``target`` in this process, if any."""
    with _lock:
        return _handlers.get(target)


def load_cached_handler(target: str) -> Handler | None:
    """The handler ``target`` from the disk cache alone, registered with XLA.

    No kernel is needed: the target name determines the cache key. Returns None
    when the cache holds no loadable entry for it (never built with this cache
    root, not cacheable, or built by other versions or another machine).

    Raises:
        KernelRegistrationError: the handler runs a parallel kernel and this
            process's Numba threading layer is not thread-safe.
    """
    from . import cache as handler_cache

    numba = import_numba()
    with _lock:
        handler = _handlers.get(target)
        if handler is not None:
            return handler
        context, codegen = _codegen()
        key = handler_cache.cache_key(target, codegen)
        found = handler_cache.lookup(key)
        if found is None:
            return None
        meta = found[1]
        if _PARALLEL_SYMBOLS.intersection(meta.get("externals", ())):
            check_parallel_layer(numba, str(meta.get("label", target)))
        handler = _from_disk(key, target, context, found)
        if handler is None:
            return None
        handler.label = str(meta.get("label", ""))
        _register(handler)
        _handlers[target] = handler
        return handler


def _register(handler: Handler) -> None:
    """Register ``handler`` through the one target registry (its name is its
    content identity); say whether another process can load it from the cache."""
    if handler.process_local:
        note = (
            "it has no content fingerprint (it reaches an object polykernel cannot "
            "hash, e.g. a numba.cfunc object), so its name is valid in this process "
            "only"
        )
    elif handler.origin == "unpublished":
        note = (
            "the cache could not be written when it was built (see the "
            "CacheWarning): another process must define the kernel before "
            "load_exported"
        )
    elif handler.origin == "uncached":
        note = (
            "its code depends on this process and is not in the disk cache (the "
            "reason is logged at DEBUG by polykernel.backends.numba.build): another "
            "process must define the kernel before load_exported"
        )
    else:
        note = ""
    targets.register(
        handler.target,
        handler.address,
        platform="cpu",
        identity=handler.target,
        backend="numba",
        label=handler.label,
        owner=handler,
        portable=not note,
        note=note,
    )


def _resolvable(context: Any, names: list[str]) -> bool:
    """True if every symbol resolves now. Numba starts its runtime (NRT) and its
    threading layer lazily, at the first compile, and a cache hit compiles
    nothing: start whichever the object needs (MCJIT aborts the process on a
    missing symbol, so nothing is loaded before this holds)."""
    from .artifact import unresolved

    codegen = context.codegen()
    missing = unresolved(codegen, names)
    if any(n.startswith("NRT_") for n in missing):
        from numba.core.runtime.nrt import rtsys

        rtsys.initialize(context)
        missing = unresolved(codegen, names)
    if missing:
        from numba.np.ufunc.parallel import _launch_threads

        _launch_threads()
        missing = unresolved(codegen, names)
    if missing:
        log.debug("unresolved symbols: %s", ", ".join(missing))
    return not missing


def _from_disk(
    key: str, target: str, context: Any, found: tuple | None = None
) -> Handler | None:
    from . import cache as handler_cache
    from .artifact import load_object

    found = found or handler_cache.lookup(key)
    if found is None:
        return None
    obj, meta = found
    if meta.get("entry") != target or not _resolvable(context, meta["externals"]):
        log.debug("numba cache entry %s cannot be loaded here; rebuilding", key[:12])
        return None
    envs = [tuple(e) for e in meta.get("environments", [])]
    library, address = load_object(context.codegen(), target, obj, envs)
    return Handler(target, address, library, "disk")


def _build(context, target, sig, label, kernel, private, key) -> Handler:
    from numba.core.compiler_lock import global_compiler_lock

    from ...ffi.handler_ir.handler import define_handler
    from . import cache as handler_cache
    from .artifact import (
        emit_object,
        external_symbols,
        link_artifact,
        load_object,
    )
    from .compile import compile_kernel, from_numba_cache
    from .entry import emit_kernel_call

    codegen = context.codegen()
    binding = compile_kernel(kernel, sig, private)
    module = codegen._create_empty_module(target)
    define_handler(module, target, sig, label, emit_kernel_call(context, binding))
    with global_compiler_lock:
        artifact = link_artifact(codegen, module, target, binding.cres.library)
        reused = from_numba_cache(binding.cres.library)
        if reused:
            artifact.problems.append(f"code from Numba's own disk cache ({reused})")
        if not artifact.self_contained:
            log.debug(
                "numba_kernel '%s': not cached, the linked code depends on this "
                "process: %s",
                label,
                "; ".join(artifact.problems),
            )
            artifact = link_artifact(codegen, module, target, None)
        externals = external_symbols(artifact.module)
        if not _resolvable(context, externals):
            raise RuntimeError(f"unresolved symbols {externals}")
        obj = emit_object(codegen, artifact)
    origin = "uncached"
    if key is not None and artifact.self_contained:
        meta = {
            "entry": target,
            "label": label,
            "signature": sig.key(),
            "externals": externals,
            "environments": artifact.environments,
        }
        origin = "built" if handler_cache.publish(key, obj, meta) else "unpublished"
    library, address = load_object(codegen, target, obj, artifact.environments)
    return Handler(target, address, (library, binding.cres.library), origin)
