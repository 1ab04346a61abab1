"""Build, cache and register the generated Numba FFI handlers.

- The handler source (``_numba_codegen``) is written to
  ``cache_root()/numba/handlers/<target>.py`` and imported from there with
  ``cfunc(..., cache=True)``: Numba's on-disk cache is keyed on the source file, so a
  new process loads the machine code instead of compiling (the file is rewritten
  only when its content changes, since a new mtime invalidates Numba's index).
- The user's kernel reaches the generated module through its globals: it is put in
  the module namespace as ``__pk_kernel__`` before the module body runs.
- Numba's threading layer is made thread-safe on first use (never at import): XLA
  may run handlers on several threads at once, which aborts the process under
  ``workqueue``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import tempfile
import threading
import types as pytypes
from pathlib import Path
from typing import Any

from ..config import cache_root, ensure_private_dir
from ..errors import BackendUnavailableError, KernelRegistrationError
from ..ffi.registry import register_cpu_target
from ._numba_codegen import Signature, handler_source

__all__ = ["build_handler", "handler_dir", "import_numba"]

_lock = threading.RLock()
_handlers: dict[str, Any] = {}
_SAFE_LAYERS = ("omp", "tbb", "threadsafe", "safe", "forksafe")


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


def handler_dir() -> Path:
    """``cache_root()/numba/handlers``, created owner-only on first use."""
    root = ensure_private_dir(cache_root())
    path = ensure_private_dir(ensure_private_dir(root / "numba") / "handlers")
    _install_locator()
    return path


def _install_locator() -> None:
    """Keep Numba's cache of our handlers next to them, inside the cache root.

    Numba would otherwise follow ``NUMBA_CACHE_DIR`` when it is set; a handler's
    machine code belongs with its generated source so ``cache clear`` removes both.
    """
    from numba.core import caching

    classes = caching.CacheImpl._locator_classes
    if classes and classes[0] is _handler_locator():
        return
    classes.insert(0, _handler_locator())


@functools.cache
def _handler_locator() -> type:
    from numba.core import caching

    class HandlerCacheLocator(caching.InTreeCacheLocator):
        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if Path(py_file).parent != handler_dir_path():
                return None
            return cls(py_func, py_file)

    return HandlerCacheLocator


def handler_dir_path() -> Path:
    """Where handler sources live (not created)."""
    return cache_root() / "numba" / "handlers"


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".py")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def build_handler(target: str, sig: Signature, label: str, kernel: Any) -> Any:
    """Compile (or load from disk) and register the handler for ``target``.

    Returns the Numba ``CFunc``; it is kept alive by the registry.
    """
    with _lock:
        cached = _handlers.get(target)
        if cached is not None:
            return cached
        # A handler loaded from the disk cache skips the compile passes that start
        # Numba's threading layer and bind its scheduler symbols; a prange kernel
        # would then jump through unresolved symbols. Start it first, always (the
        # kernel may call parallel functions even if it is not parallel itself).
        from numba.np.ufunc.parallel import _launch_threads

        _launch_threads()
        path = handler_dir() / f"{target}.py"
        _write_if_changed(path, handler_source(sig, label))
        spec = importlib.util.spec_from_file_location(f"_pk_numba_{target}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__pk_kernel__"] = kernel
        sys.modules[spec.name] = module  # Numba's cache resolves the module by name
        try:
            spec.loader.exec_module(module)
        except Exception:
            sys.modules.pop(spec.name, None)
            raise
        handler = module.handler
        register_cpu_target(target, handler.address, (handler, module))
        _handlers[target] = handler
        return handler
