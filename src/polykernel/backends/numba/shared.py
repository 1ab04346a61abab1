"""A handler as a shared object: linked at build time, loaded with :mod:`ctypes`.

:func:`emit_handler` emits the self-contained handler module (:mod:`.artifact`)
as position-independent code, its calls to Numba's helpers renamed to
polykernel's runtime library (:func:`.rewrite.use_runtime`); :func:`link_handler`
links it into a shared object with the C compiler driver
(:func:`polykernel.native.link.link_shared`). :func:`load_handler` opens one: the
runtime library first (its symbols global), then the handler, every undefined
symbol resolved by name by the dynamic loader; nothing of Numba or llvmlite is
imported.

Numba environments (:mod:`.artifact`) are exported data symbols of the library,
pointed at a fresh environment when it is loaded: Numba's own class when Numba is
imported, else an object of the same layout (the code only reads its
``globals``/``consts`` slots, and only when it holds constants, which a cached
kernel never does).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "emit_handler",
    "follow_numba_threads",
    "fresh_environment",
    "link_handler",
    "linker_available",
    "load_handler",
    "pic_target_machine",
    "private_copy",
]

log = logging.getLogger(__name__)
#: Extra flags of the link: the math library is the one C library a kernel calls
#: that a Python process may not have loaded globally.
_LINK_FLAGS = ("-lm",)


def linker_available() -> bool:
    """A C compiler driver can link here (else handlers take the JIT path)."""
    from ...errors import HostCompilerNotFoundError
    from ...native.link import find_linker

    try:
        find_linker()
    except HostCompilerNotFoundError:
        return False
    return True


def pic_target_machine(codegen: Any) -> Any:
    """Numba's own code generation settings (CPU, features, optimisation level),
    position-independent for a shared object (the JIT's is static)."""
    import llvmlite.binding as ll
    from numba.core import config

    target = ll.Target.from_triple(ll.get_process_triple())
    return target.create_target_machine(
        cpu=codegen._get_host_cpu_name(),
        features=codegen._tm_features,
        # Numba sets its settings at import (globals().update), unseen by pyright
        opt=config.OPT,  # pyright: ignore[reportAttributeAccessIssue]
        reloc="pic",
        codemodel="default",
    )


def emit_handler(codegen: Any, module: Any) -> bytes:
    """Position-independent machine code for ``module``, its calls to Numba's
    helpers renamed to the runtime library's (on a copy: ``module`` stays usable
    for Numba's JIT). Hold Numba's compiler lock (LLVM's context is shared)."""
    import llvmlite.binding as ll

    from .rewrite import use_runtime

    copy = ll.parse_bitcode(module.as_bitcode())
    use_runtime(copy)
    return bytes(pic_target_machine(codegen).emit_object(copy))


def private_path(target: str) -> Path:
    """A new file of this process's private folder (removed at exit) for a
    handler library: loaded from there, it cannot change under the loader."""
    from ...native.cache import private_dir

    handle, path = tempfile.mkstemp(prefix=f"{target}-", suffix=".so",
                                    dir=private_dir())  # fmt: skip
    os.close(handle)
    return Path(path)


def private_copy(data: bytes, target: str) -> Path:
    """``data`` in a new private file (see :func:`private_path`)."""
    path = private_path(target)
    path.write_bytes(data)
    return path


def link_handler(objects: Sequence[bytes], target: str) -> Path:
    """Link the handler's object files (one, or the handler's and the kernel's:
    :mod:`.parts`) into a shared object in the private folder; its path.

    Raises:
        HostCompilerNotFoundError: no C compiler driver is installed.
        CompilationError: the link failed.
    """
    from ...native.link import link_shared

    return link_shared(objects, private_path(target), flags=_LINK_FLAGS)


class _Environment:
    """The layout of Numba's ``Environment`` object (``PyObject_HEAD``, then
    ``globals`` and ``consts``), for processes without Numba."""

    # CPython lays slots out in sorted order: these names keep Numba's order
    __slots__ = ("body_1_globals", "body_2_consts")

    def __init__(self, module_globals: dict) -> None:
        self.body_1_globals = module_globals
        self.body_2_consts: list = []


def fresh_environment(modname: str) -> Any:
    """An empty-constant environment over ``modname``'s globals (looked up, never
    imported), like the one Numba's cache rebuilds."""
    module = sys.modules.get(modname)
    space = vars(module) if module is not None else {"__name__": modname}
    if sys.modules.get("numba") is not None:  # None: blocked from importing
        from numba.core.environment import Environment

        return Environment(space)
    env = _Environment(space)
    # the compiled code finds `globals` right after the object header
    header = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    if ctypes.c_void_p.from_address(id(env) + header).value != id(space):
        raise RuntimeError("polykernel: cannot lay out a Numba environment here")
    return env


_FOLLOWED = ("_get_num_threads", "_set_num_threads", "_get_parallel_chunksize",
             "_set_parallel_chunksize")  # fmt: skip


def follow_numba_threads(runtime: Any) -> None:
    """Where Numba runs too, keep one setting per thread: the count of threads
    and chunk size ``numba.set_num_threads``/``set_parallel_chunksize`` gave a
    thread are its kernels', as when handlers ran on Numba's own layer (XLA runs
    a small program on its caller's thread). Now if Numba's layer has started,
    else when it starts (setting either starts it)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is None:
        return
    if getattr(parallel, "_is_initialized", False):
        functions: list[Any] = [getattr(parallel, n, None) for n in _FOLLOWED]
        if None not in functions:
            follow = runtime.pkrt_follow_numba
            follow.argtypes, follow.restype = [ctypes.c_void_p] * 4, None
            follow(*(ctypes.cast(f, ctypes.c_void_p) for f in functions))
        return
    launch = parallel._launch_threads
    if getattr(launch, "follows", False):
        return

    def launched() -> None:
        launch()
        follow_numba_threads(runtime)

    launched.follows = True  # type: ignore[attr-defined]
    setattr(parallel, "_launch_threads", launched)  # noqa: B010 - Numba's module


def load_handler(
    path: Path, entry: str, environments: list | None = None
) -> tuple[Any, int]:
    """Open the handler library ``path``; return ``(owner, address of entry)``.

    ``environments``: ``(symbol, module)`` of each Numba environment to provide;
    the owner keeps them alive with the library.

    Raises:
        KernelLoadError: the library (or the runtime library) does not load or
            lacks ``entry``.
    """
    from ...errors import KernelLoadError
    from ...ffi.artefact import load_library, symbol_address
    from ...native.runtime import load_runtime

    follow_numba_threads(load_runtime())
    library = load_library(path)
    address = symbol_address(library, entry)
    envs = []
    for symbol, modname in environments or []:
        try:
            slot = ctypes.c_void_p.in_dll(library, symbol)
            env = fresh_environment(modname)
        except (ValueError, RuntimeError) as err:
            raise KernelLoadError(f"polykernel: {path}: {err}") from err
        slot.value = id(env)
        envs.append(env)
    return (library, envs), address
