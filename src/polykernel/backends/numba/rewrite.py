"""Make a linked handler module name what it needs instead of this process's copy.

Two rewrites of the module :mod:`.artifact` links, both before it is proven
self-contained:

- :func:`name_threading_functions`: a kernel calling ``numba.get_num_threads()``
  (and the other threading functions Numba's overloads reach through ``ctypes``)
  holds the address of Numba's C function in a ``numba.dynamic.globals`` global:
  an address of this process, so the kernel was never cached. The address is
  known (Numba's threading layer gave it), so the global is pointed at the
  function by its name instead (``get_num_threads``), which every loader
  resolves: Numba's JIT to the same function, a shared object to polykernel's
  runtime.
- :func:`use_runtime`: Numba's helper, memory-runtime and threading-layer
  functions are renamed to polykernel's runtime library's (``numba_do_raise`` ->
  ``pkrt_do_raise``, :data:`polykernel.native.runtime.RENAMES`), for a handler
  linked into a shared object. :func:`unsupported` lists the external names
  such a handler could not resolve by name in another process.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import re
from typing import Any

__all__ = ["name_threading_functions", "unsupported", "use_runtime"]

# What Numba's threading overloads call through ctypes (numba.np.ufunc.parallel):
# its Python name -> the C function's name.
_CTYPES_FUNCTIONS = {
    "_get_num_threads": "get_num_threads",
    "_set_num_threads": "set_num_threads",
    "_get_thread_id": "get_thread_id",
    "_get_parallel_chunksize": "get_parallel_chunksize",
    "_set_parallel_chunksize": "set_parallel_chunksize",
    "_get_sched_size": "get_sched_size",
}
_DYNAMIC = re.compile(
    r'^(@"?numba\.dynamic\.globals\.[0-9a-f]+"?) = [^\n]*?global ptr '
    r"inttoptr \(i64 (-?\d+) to ptr\)[^\n]*$",
    re.MULTILINE,
)


def _threading_addresses() -> dict[int, str]:
    """Address of each of Numba's threading functions in this process -> its C
    name (empty before Numba started its threading layer: no kernel holds one)."""
    import sys

    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is None or not getattr(parallel, "_is_initialized", False):
        return {}
    found = {}
    for attr, name in _CTYPES_FUNCTIONS.items():
        fn = getattr(parallel, attr, None)
        if fn is not None:
            found[ctypes.cast(fn, ctypes.c_void_p).value or 0] = name
    return found


def name_threading_functions(module: Any) -> Any:
    """``module`` (an llvmlite ModuleRef) with every dynamic global holding a
    threading function's address pointing at that function by name; the same
    module when there is none."""
    import llvmlite.binding as ll

    globals_ = module.global_variables
    if not any(g.name.startswith("numba.dynamic.globals") for g in globals_):
        return module
    addresses = _threading_addresses()
    text = str(module)
    declared = {f.name for f in module.functions}
    needed: set[str] = set()

    renamed: dict[str, str] = {}

    def repoint(match: re.Match) -> str:
        name = addresses.get(int(match.group(2)) % (1 << 64))
        if name is None:
            return match.group(0)  # another object: stays, and is a problem
        needed.add(name)
        # named for what it holds now, no longer an address of this process
        renamed[match.group(1)] = f'@"pk.threading.{name}"'
        return f"{match.group(1)} = internal unnamed_addr constant ptr @{name}"

    text = _DYNAMIC.sub(repoint, text)
    if not needed:
        return module
    for old, new in renamed.items():
        text = re.sub(re.escape(old) + r"(?![\w.$])", new, text)
    # the type of a declaration only used as an address does not matter
    text += "".join(f"\ndeclare void @{n}()" for n in sorted(needed - declared))
    rewritten = ll.parse_assembly(text)
    rewritten.triple, rewritten.data_layout = module.triple, module.data_layout
    rewritten.verify()
    return rewritten


def use_runtime(module: Any) -> None:
    """Rename, in place, every declaration of a function polykernel's runtime
    library provides to the runtime's name."""
    from ...native.runtime import RENAMES

    for fn in module.functions:
        if fn.is_declaration and fn.name in RENAMES:
            fn.name = RENAMES[fn.name]


@functools.cache
def _c_library() -> tuple[Any, ...]:
    """The C and math libraries (by soname: ``ctypes.util.find_library`` would
    start a process), else what the process has loaded globally."""
    found = []
    for name in ("libc.so.6", "libm.so.6"):
        with contextlib.suppress(OSError):
            found.append(ctypes.CDLL(name))
    return tuple(found) or (ctypes.CDLL(None),)


def _in_c_library(name: str) -> bool:
    return any(hasattr(lib, name) for lib in _c_library())


def unsupported(externals: list[str]) -> list[str]:
    """The names in ``externals`` (a handler's undefined symbols, Numba's names)
    that neither the runtime library, the stable CPython C API (
    :data:`~polykernel.native.runtime.CAPI`), the C library nor the compiler's
    own support library (``__*``, linked in) provides."""
    from ...native.runtime import CAPI, RENAMES

    return [
        name
        for name in externals
        if name not in RENAMES
        and name not in CAPI
        and not name.startswith("__")
        and (name.startswith(("Py", "_Py", "numba", "NRT")) or not _in_c_library(name))
    ]
