"""polykernel's runtime library: what Numba-compiled handlers need, without Numba.

A Numba handler built into a shared object (:mod:`polykernel.backends.numba`)
calls Numba's C helpers (raising an exception, unpickling its description,
reshaping), its memory runtime (NRT) and its threading layer by name. Those live in
Numba's extension modules, which only Numba's JIT can resolve, so the handler is
emitted with each renamed (:data:`RENAMES`) to a function of this library, which
keeps Numba's ABI and semantics; its C source is ``native/runtime/``. Everything
else a handler may call is the CPython C API (:data:`CAPI`: functions whose ABI is
the same in every CPython 3 it runs on, so an artefact built on 3.11 loads on 3.12)
or the C library.

The library is compiled once per machine, through the one native build path
(:func:`polykernel.native.build.fetch_or_build`, the ``native`` cache section),
keyed by its source, flags and machine only: no compiler is asked anything on a
warm start, and a process without a compiler finds it in the cache.
:func:`runtime_library` gives its path (what a bundle carries);
:func:`load_runtime` opens it once per process, its symbols global, before any
handler is loaded.

The Python half of the library is here too (:func:`unpickle`,
:func:`build_excinfo`, :func:`raise_args`): the C code calls them, with the GIL,
when a kernel raises. They import no Numba: a process without it reports a
kernel's exception as Numba would.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import logging
import pickle
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

from . import runtime_recipe
from .runtime_recipe import (
    ABI_VERSION,
    FLAGS as _FLAGS,
    NAME as _NAME,
    source as _source,
)

__all__ = [
    "CAPI",
    "RENAMES",
    "build_excinfo",
    "load_runtime",
    "prefetch_runtime",
    "raise_args",
    "runtime_library",
    "unpickle",
]

_HELPERS = ("do_raise", "unpickle", "attempt_nocopy_reshape", "gil_ensure",
            "gil_release", "frexp", "frexpf", "ldexp", "ldexpf", "gamma",
            "gammaf", "lgamma", "lgammaf", "erf", "erff", "erfc", "erfcf",
            "nextafter", "nextafterf", "fptoui", "fptouif", "sdiv", "udiv", "srem",
            "urem")  # fmt: skip
_THREADING = ("do_scheduling_signed", "do_scheduling_unsigned", "allocate_sched",
              "deallocate_sched", "get_sched_size", "get_num_threads",
              "set_num_threads", "get_thread_id", "get_parallel_chunksize",
              "set_parallel_chunksize")  # fmt: skip
_NRT = ("Allocate", "Allocate_External", "Reallocate", "Free", "dealloc",
        "MemInfo_init", "MemInfo_new", "MemInfo_alloc", "MemInfo_alloc_external",
        "MemInfo_alloc_safe", "MemInfo_alloc_dtor", "MemInfo_alloc_dtor_safe",
        "MemInfo_alloc_aligned", "MemInfo_alloc_safe_aligned",
        "MemInfo_alloc_safe_aligned_external", "MemInfo_destroy",
        "MemInfo_call_dtor", "MemInfo_acquire", "MemInfo_release", "MemInfo_data",
        "MemInfo_size", "MemInfo_parent", "MemInfo_external_allocator",
        "MemInfo_refcount", "MemInfo_new_varsize", "MemInfo_new_varsize_dtor",
        "MemInfo_varsize_alloc", "MemInfo_varsize_realloc",
        "MemInfo_varsize_free")  # fmt: skip
#: Numba's name of each function this library provides -> its name here.
RENAMES: dict[str, str] = {
    **{f"numba_{n}": f"pkrt_{n}" for n in _HELPERS},
    "numba_runtime_build_excinfo_struct": "pkrt_build_excinfo_struct",
    "numba_parallel_for": "pkrt_parallel_for",
    **{n: f"pkrt_{n}" for n in _THREADING},
    **{f"NRT_{n}": f"pkrt_NRT_{n}" for n in _NRT},
}

#: The CPython C API a handler may call (resolved by name in the loading process):
#: what handlers' error paths (polykernel.ffi.handler_ir) and Numba's code for
#: raising, boxing exception arguments and releasing the GIL call. Each is public
#: API declared alike in the headers of every CPython it runs on (checked for 3.11
#: and 3.12 by tests/backends/numba/test_runtime.py), so one artefact serves them
#: all; the data symbols are the stable ABI's. Objects are only reached through
#: these calls (and ``ob_type``, at the same offset in every non-debug build).
_CAPI_TEXT = """
    PyArg_ParseTuple PyArg_UnpackTuple PyBool_FromLong PyBytes_AsString
    PyBytes_AsStringAndSize PyBytes_FromStringAndSize PyComplex_FromDoubles
    PyComplex_ImagAsDouble PyComplex_RealAsDouble PyDict_GetItem
    PyDict_GetItemString PyDict_New PyDict_SetItem PyDict_SetItemString
    PyErr_Clear PyErr_ExceptionMatches PyErr_Fetch PyErr_Format
    PyErr_GivenExceptionMatches PyErr_NoMemory PyErr_NormalizeException
    PyErr_Occurred PyErr_Restore PyErr_SetNone PyErr_SetObject PyErr_SetString
    PyErr_WriteUnraisable PyEval_RestoreThread PyEval_SaveThread PyFloat_AsDouble
    PyFloat_FromDouble PyGILState_Ensure PyGILState_Release PyImport_ImportModule
    PyList_Append PyList_GetItem PyList_New PyList_SetItem PyList_Size
    PyLong_AsLong PyLong_AsLongLong PyLong_AsSsize_t PyLong_AsUnsignedLongLong
    PyLong_AsVoidPtr PyLong_FromLong PyLong_FromLongLong PyLong_FromSize_t
    PyLong_FromSsize_t PyLong_FromUnsignedLong PyLong_FromUnsignedLongLong
    PyLong_FromVoidPtr PyNumber_AsSsize_t PyObject_Call PyObject_CallFunction
    PyObject_CallFunctionObjArgs PyObject_CallObject PyObject_GetAttr
    PyObject_GetAttrString PyObject_GetItem PyObject_Hash PyObject_IsTrue
    PyObject_Repr PyObject_SetAttrString PyObject_Str PyObject_Type
    PySequence_Tuple PySys_FormatStdout PySys_WriteStdout PyTuple_GetItem
    PyTuple_New PyTuple_Pack PyTuple_SetItem PyTuple_Size
    PyUnicode_AsUTF8 PyUnicode_AsUTF8AndSize PyUnicode_AsUTF8String
    PyUnicode_FromKindAndData PyUnicode_FromString PyUnicode_FromStringAndSize
    Py_BuildValue Py_DecRef Py_IncRef Py_FatalError
    PyArg_ParseTupleAndKeywords PyIter_Next PyList_SetSlice PyNumber_Float
    PyNumber_InPlacePower PyNumber_Invert PyNumber_Long PyNumber_Negative
    PyNumber_Positive PyNumber_Power PyObject_CallMethod PyObject_DelItem
    PyObject_GetIter PyObject_Not PyObject_RichCompare PyObject_SetAttr
    PyObject_SetItem PySequence_Concat PySequence_Contains PySequence_GetSlice
    PySet_Add PySet_Clear PySet_New PySet_Size
    _Py_FalseStruct _Py_NoneStruct _Py_TrueStruct
    PyExc_ArithmeticError PyExc_AssertionError PyExc_AttributeError
    PyExc_BaseException PyExc_Exception PyExc_FloatingPointError PyExc_IndexError
    PyExc_KeyError PyExc_LookupError PyExc_MemoryError PyExc_NameError
    PyExc_NotImplementedError PyExc_OverflowError PyExc_RuntimeError
    PyExc_StopIteration PyExc_SystemError PyExc_TypeError PyExc_ValueError
    PyExc_ZeroDivisionError
"""
CAPI = frozenset(_CAPI_TEXT.split())

_lock = threading.Lock()
_loaded: ctypes.CDLL | None = None
_prefetching: threading.Thread | None = None
log = logging.getLogger(__name__)


@functools.cache
def _key() -> str:
    from ..ffi.artefact import machine
    from .cache import compute_key

    return compute_key({"source": _source(), "flags": " ".join(_FLAGS),
                        "machine": machine(), "abi": str(ABI_VERSION)})  # fmt: skip


def _fetch(load: Any) -> tuple[Path, Any]:
    """The library from the cache, else the copy built at install (adopted into
    the cache), else built (one build per machine); ``load`` opens it (while the
    build lock is held, when built or adopted here)."""
    from . import cache

    found = cache.lookup(_key())
    if found is not None:
        try:
            return found, load(found)
        except OSError:  # removed or damaged since the check: build
            pass
    adopted = _adopt_shipped(load)
    if adopted is not None:
        return adopted
    from .build import BuildJob, fetch_or_build
    from .link import find_linker

    command = tuple(runtime_recipe.command(find_linker(), "<src>", "<out>"))
    job = BuildJob(_NAME, _key(), _source(), "c", command, timeout=300.0,
                   meta={"runtime_abi": ABI_VERSION})  # fmt: skip
    fetched = fetch_or_build(job, load)
    return fetched.path, fetched.handle


def _adopt_shipped(load: Any) -> tuple[Path, Any] | None:
    """The library ``pip install`` built into the package, published into the cache
    as if built here, and opened; None where there is none of this recipe (then
    it is built). Publishing it keeps the cache what a bundle and ``cache info``
    read; a cache that cannot be written gets the package's own file opened."""
    from ..ffi.artefact import machine
    from . import cache

    shipped = runtime_recipe.SHIPPED
    library = runtime_recipe.shipped_library(machine(), shipped)
    if library is None:
        return None
    with cache.build_lock(_key()):
        path = cache.lookup(_key())  # another process built or adopted it meanwhile
        ours = None  # the entry published here, removed again if it does not load
        if path is None:
            meta = {"runtime_abi": ABI_VERSION, "name": _NAME,
                    "shipped": str(shipped)}  # fmt: skip
            path = ours = cache.publish(_key(), library, _source(), "c", meta)
        if path is None:  # the cache cannot be written
            path = shipped / runtime_recipe.LIBRARY
        try:
            return path, load(path)
        except OSError as err:  # it does not open here (an older C library): build
            log.info("polykernel: the runtime library built at install does not "
                     "load here (%s); building it", err)  # fmt: skip
            if ours is not None:  # under the lock: no other process has opened it
                shutil.rmtree(ours.parent, ignore_errors=True)
            return None


def runtime_library() -> Path:
    """The path of the runtime library, built (once per machine) if needed.

    Raises:
        HostCompilerNotFoundError: it is not in the cache and no C compiler is
            installed to build it.
        CompilationError: it failed to build.

    Example:
        >>> from polykernel.native.runtime import runtime_library
        >>> runtime_library().name
        'lib.so'
    """
    return _fetch(lambda path: path)[0]


def prefetch_runtime() -> None:
    """Have the runtime library ready by the time a first kernel needs it: in a
    process that has not opened it, look it up or build it in a background thread.

    A kernel's first build starts this before Numba compiles the kernel, so the
    library's one C compile (~0.8 s here, once per machine and cache) runs beside
    Numba's compile on another core instead of after it. :func:`load_runtime` waits
    for the thread, then fetches as always: a failed build is raised there.
    """
    global _prefetching
    with _lock:
        if _loaded is not None or _prefetching is not None:
            return
        # Not a daemon: an exiting process finishes the build it started rather
        # than leave a compiler running and a staging folder behind.
        _prefetching = threading.Thread(
            target=_build_quietly, name="polykernel-runtime-prefetch"
        )
        _prefetching.start()


def _build_quietly() -> None:
    # A failure is left for load_runtime, which fetches again and raises it.
    with contextlib.suppress(Exception):
        runtime_library()


def load_runtime() -> ctypes.CDLL:
    """Open the runtime library (once per process), its symbols global: handlers
    loaded after it resolve Numba's helpers to it.

    Raises:
        HostCompilerNotFoundError, CompilationError: see :func:`runtime_library`.
        KernelLoadError: it does not load, or is of another ABI version.
    """
    global _loaded
    from ..errors import KernelLoadError
    from ..ffi.artefact import load_library

    prefetch = _prefetching
    if prefetch is not None:
        prefetch.join()  # one build at a time: the cache then holds it
    with _lock:
        if _loaded is not None:
            return _loaded
        path, library = _fetch(lambda p: load_library(p, shared=True))
        version = library.pkrt_abi_version()
        if version != ABI_VERSION:
            raise KernelLoadError(
                f"polykernel: the runtime library {path} has ABI version "
                f"{version}, this polykernel needs {ABI_VERSION}. Clear the cache "
                f"(polykernel cache clear) and run again."
            )
        _loaded = library
        return library


# -- the Python half: called from the C code, with the GIL --------------------------


class _Absent:
    """Stands in for a class a pickle names that is not imported: the llvmlite
    values marking run-time arguments in an exception's description (never read:
    they are replaced by the arguments), or any class of Numba's where it cannot
    import."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def __setstate__(self, state: Any) -> None:
        del state


# Packages a pickled exception description names: llvmlite's classes mark its
# run-time arguments; Numba's may be absent from the process.
_PLACEHOLDERS = ("llvmlite",)
_COMPILERS = ("llvmlite", "numba")


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        top = module.split(".")[0]
        if top in _PLACEHOLDERS and module not in sys.modules:
            # a placeholder: importing llvmlite for it would cost more than the
            # kernel's error path it is on
            return type(name, (_Absent,), {"__module__": module})
        try:
            return super().find_class(module, name)
        except ImportError:
            if top in _COMPILERS:
                return type(name, (_Absent,), {"__module__": module})
            raise


def _loads(data: bytes) -> Any:
    import io

    return _Unpickler(io.BytesIO(data)).load()


_memo: dict[tuple[int, bytes], Any] = {}


def unpickle(address: int, data: bytes, hashed: bytes) -> Any:
    """numba_unpickle: the object pickled in ``data``, memoised by the address of
    its bytes and their SHA-1, as ``numba.core.serialize._numba_unpickle``."""
    key = (address, hashed)
    try:
        return _memo[key]
    except KeyError:
        _memo[key] = obj = _loads(data)
        return obj


def _is_placeholder(arg: Any) -> bool:
    """An argument known only at run time (an LLVM value when compiled)."""
    if isinstance(arg, _Absent):
        return True
    ir = sys.modules.get("llvmlite.ir")
    return ir is not None and isinstance(arg, ir.Value)


def build_excinfo(static_exc: bytes, exc_args: tuple) -> tuple:
    """numba_runtime_build_excinfo_struct: ``(class, arguments, location)`` of an
    exception raised with run-time values, its placeholders replaced by them."""
    exc, static_args, location = _loads(static_exc)
    values = iter(exc_args)
    args = tuple(next(values) if _is_placeholder(a) else a for a in static_args)
    return (exc, args, location)


def raise_args(packed: Any) -> tuple[Any, Any, int]:
    """numba_do_raise's rules: what to raise for ``packed``, as ``(type, value,
    status)`` for ``PyErr_SetObject``; raises instead when Numba sets another
    error (a re-raise with no active exception, an object that is no exception).
    """
    value = None
    if type(packed) is tuple:
        if len(packed) != 3:
            raise TypeError(f"function takes exactly 3 arguments ({len(packed)} given)")
        packed, value, _location = packed  # the location adds a traceback entry
    if packed is None:  # re-raise
        _, active, _ = sys.exc_info()
        if active is None:
            raise RuntimeError("No active exception to reraise")
        return type(active), active, 1
    if isinstance(packed, type) and issubclass(packed, BaseException):
        if value is not None and not isinstance(value, tuple):
            raise TypeError("argument list must be a tuple")
        if not isinstance(packed(*(value or ())), BaseException):
            raise TypeError("exceptions must derive from BaseException")
        return packed, value, 1
    if isinstance(packed, BaseException):
        return type(packed), packed, 0
    raise TypeError("exceptions must derive from BaseException")
