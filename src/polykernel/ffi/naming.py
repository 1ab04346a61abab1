"""Content-derived FFI target names.

XLA refuses a second handler under an existing name, and a name that outlives a
change of the code it stands for silently runs stale machine code (brainevent's bug
B2: two kernels differing only in ``error_model`` shared one handler). So a target
name is a SHA-256 over everything that decides the machine code:

- the kernel's Python code, recursively through the functions and jitted
  dispatchers it references (bytecode, constants, closure values, globals);
- the dispatcher's compile options (``parallel``, ``fastmath``, ``error_model``,
  ``boundscheck``, ``nogil``, ...) and the Numba settings that change code;
- the call signature the handler checks (dtypes, ranks, attribute names/dtypes);
- the Numba version and the handler ABI/template version.

Shapes are not part of it: handlers read them from the call frame at run time.
"""

from __future__ import annotations

import hashlib
import json
import types as pytypes
from typing import Any

import numpy as np

__all__ = ["kernel_fingerprint", "target_name"]

_SCALARS = (int, float, complex, str, bytes, bool, type(None))


def _options(dispatcher: Any) -> str:
    opts = dict(getattr(dispatcher, "targetoptions", {}) or {})
    return json.dumps(opts, sort_keys=True, default=repr)


def _feed(h: Any, obj: Any, seen: set[int], depth: int = 0) -> None:
    """Hash ``obj`` by content; unknown objects hash by identity (never shared)."""
    if depth > 50:
        h.update(b"<deep>")
        return
    if isinstance(obj, _SCALARS):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, tuple | list | frozenset | set):
        h.update(f"{type(obj).__name__}[".encode())
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        for item in items:
            _feed(h, item, seen, depth + 1)
        h.update(b"]")
    elif isinstance(obj, np.ndarray | np.generic):
        arr = np.asarray(obj)
        h.update(f"nd:{arr.dtype.str}:{arr.shape}:".encode())
        h.update(hashlib.sha256(np.ascontiguousarray(arr).tobytes()).digest())
    elif isinstance(obj, pytypes.ModuleType):
        h.update(f"module:{obj.__name__};".encode())
    elif isinstance(obj, pytypes.CodeType):
        _feed_code(h, obj, seen, depth)
    elif hasattr(obj, "py_func") and hasattr(obj, "targetoptions"):
        h.update(f"dispatcher:{type(obj).__qualname__}:{_options(obj)};".encode())
        _feed(h, obj.py_func, seen, depth + 1)
    elif isinstance(obj, pytypes.FunctionType):
        _feed_function(h, obj, seen, depth)
    elif isinstance(obj, type):
        h.update(f"type:{obj.__module__}.{obj.__qualname__};".encode())
    else:
        # Unknown object: its repr may not reflect its content, so hash its identity.
        # Correct (never shared by mistake) at the price of a disk-cache miss.
        h.update(f"obj:{type(obj).__qualname__}:{id(obj)};".encode())


def _feed_code(h: Any, code: pytypes.CodeType, seen: set[int], depth: int) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    for const in code.co_consts:
        _feed(h, const, seen, depth + 1)


def _feed_function(
    h: Any, fn: pytypes.FunctionType, seen: set[int], depth: int
) -> None:
    if id(fn) in seen:
        h.update(f"recursive:{fn.__qualname__};".encode())
        return
    seen.add(id(fn))
    h.update(f"fn:{fn.__module__}.{fn.__qualname__};".encode())
    _feed_code(h, fn.__code__, seen, depth)
    _feed(h, fn.__defaults__, seen, depth + 1)
    _feed(h, tuple(sorted((fn.__kwdefaults__ or {}).items())), seen, depth + 1)
    for cell in fn.__closure__ or ():
        try:
            _feed(h, cell.cell_contents, seen, depth + 1)
        except ValueError:  # empty cell
            h.update(b"<empty cell>")
    names = sorted(_global_names(fn.__code__))
    for name in names:
        if name in fn.__globals__:
            h.update(f"global:{name}=".encode())
            _feed(h, fn.__globals__[name], seen, depth + 1)


def _global_names(code: pytypes.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _global_names(const)
    return names


def kernel_fingerprint(kernel: Any) -> str:
    """SHA-256 hex digest over a jitted kernel's code *and* compile options.

    Example:
        >>> import numba
        >>> f = numba.njit(lambda x: x)
        >>> g = numba.njit(error_model="numpy")(lambda x: x)
        >>> kernel_fingerprint(f) != kernel_fingerprint(g)
        True
    """
    h = hashlib.sha256()
    try:
        import numba

        h.update(f"numba {numba.__version__};".encode())
        cfg = numba.config
        h.update(f"cfg {cfg.BOUNDSCHECK} {cfg.OPT};".encode())
    except ImportError:  # pragma: no cover - fingerprints are only taken with numba
        pass
    _feed(h, kernel, set())
    return h.hexdigest()


def target_name(prefix: str, *parts: str) -> str:
    """A valid FFI target name (and Python identifier) from a prefix and parts.

    Example:
        >>> target_name("pk_numba", "abc", "f32[1]")[:9]
        'pk_numba_'
    """
    digest = hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:24]
    return f"{prefix}_{digest}"
