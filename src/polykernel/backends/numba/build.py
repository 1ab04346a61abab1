"""Get the handler for (kernel, signature): from the disk cache, or build it.

Hit (:func:`_from_cache`): the cache is an index by target name (:mod:`.cache`),
read without Numba. A shared-object handler is opened with :mod:`ctypes`
(:mod:`.shared`): no Numba codegen starts, nothing is JIT-linked, no process runs.

Build (cold path, :mod:`.making`): compile the kernel for the signature, generate
the handler as LLVM IR around a call to it, link both into one module with only
the handler exported and prove it self-contained (:mod:`.artifact`), then link it
into a shared object calling polykernel's runtime library, publish and load it.

Fallback (the reason at DEBUG, logger ``polykernel.backends.numba.build``, as every
reason a handler is not a cached shared object): where no C compiler can link, or
the code calls a Numba helper the runtime library does not provide, the handler
is an object file loaded into Numba's JIT, cached the same way (a later process
needs Numba to load it).

Not cached: a kernel that cannot be fingerprinted by content, or whose linked code
depends on this process (dynamic globals, a Numba environment holding constants,
code Numba loaded from its own disk cache, ...). The former still runs the linked
artefact; the latter a handler whose kernel symbol resolves to the kernel compiled
in this process, like any Numba call.

Numba's threading layer is made thread-safe on first use (never at import): XLA
may run handlers on several threads at once, which aborts the process under
``workqueue`` (a handler in Numba's JIT runs on Numba's layer; a shared object
on the runtime library's, which is thread-safe).
"""

from __future__ import annotations

import importlib
import logging
import threading
import types as pytypes
from typing import Any

from ...errors import BackendUnavailableError, KernelRegistrationError
from ...ffi import targets
from ...ffi.artefact import Artefact
from ...ffi.handler_ir.signature import Signature
from .handler import Handler

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
        if cacheable:
            handler = _from_cache(target)
            if handler is None:
                from .making import build  # the cold path only

                with handler_cache.lock(target):  # one build across processes
                    handler = _from_cache(target, discard=True) or build(
                        target, sig, label, kernel, private, cacheable=True
                    )
        else:
            from .making import build

            log.debug("numba_kernel '%s': not cached (no content fingerprint)", label)
            handler = build(target, sig, label, kernel, private, cacheable=False)
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

    No kernel is needed: the cache is indexed by the target name. A shared-object
    handler needs neither Numba nor llvmlite. Returns None when the cache holds no
    loadable entry for it (never built with this cache root, not cacheable, built
    for another machine or jaxlib, or a JIT object and Numba is not installed).

    Raises:
        KernelRegistrationError: the handler is a JIT object running a parallel
            kernel and this process's Numba threading layer is not thread-safe.
    """
    with _lock:
        handler = _handlers.get(target)
        if handler is not None:
            return handler
        handler = _from_cache(target)
        if handler is None:
            return None
        _register(handler)
        _handlers[target] = handler
        return handler


def _from_cache(target: str, discard: bool = False) -> Handler | None:
    """The cached handler ``target``, loaded; None on a miss (any fault).
    ``discard``: remove an entry that does not load here (under the build lock,
    before a rebuild replaces it)."""
    from ...errors import CompilationError, KernelLoadError, KernelToolchainError
    from . import cache as handler_cache

    found = handler_cache.find(target, discard=discard)
    if found is None:
        return None
    try:
        handler = _load_shared(found) if found.shared else _load_object(found)
    except (KernelLoadError, BackendUnavailableError) as err:
        log.debug("numba handler %s from the cache does not load: %s", target, err)
        handler = None
    except (KernelToolchainError, CompilationError) as err:
        # the runtime library is not in the cache and cannot be built here: the
        # handler is fine, keep it
        log.debug("numba handler %s: no runtime library: %s", target, err)
        return None
    if handler is None:
        if discard and not found.readonly:
            handler_cache.discard_entry(found.path.parent)
        return None
    handler.label = str(found.meta.get("label", ""))
    return handler


def _load_shared(found: Any) -> Handler:
    from ...ffi.artefact import Requirements
    from . import cache as handler_cache
    from .shared import load_handler, private_copy

    meta = found.meta
    target = meta["entry"]
    # a read-only tier's file could change between the check and the load
    path = private_copy(found.data, target) if found.readonly else found.path
    envs = [tuple(e) for e in meta.get("environments", [])]
    owner, address = load_handler(path, target, envs)
    requires = Requirements.from_json(meta["requires"])
    sha256 = meta["files"][handler_cache.SHARED]["sha256"]
    artefact = Artefact(target, "numba", str(path), target, sha256, requires,
                        label=str(meta.get("label", "")),
                        extra={"runtime": True})  # fmt: skip
    return Handler(target, address, owner, "disk", artefact=artefact)


def _load_object(found: Any) -> Handler | None:
    """A JIT object entry, into Numba's engine (Numba needed)."""
    from .making import codegen, load_jit_object, magic

    meta = found.meta
    numba = import_numba()
    if _PARALLEL_SYMBOLS.intersection(meta["externals"]):
        check_parallel_layer(numba, str(meta.get("label", meta["entry"])))
    context, gen = codegen()
    if meta.get("magic") != magic(gen):
        log.debug("numba handler %s: built by another code generator", meta["entry"])
        return None
    return load_jit_object(context, meta["entry"], found.data, meta)


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
            "reason is logged at DEBUG by polykernel.backends.numba.build): "
            "another process must define the kernel before load_exported"
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
        artefact=handler.artefact,
    )
