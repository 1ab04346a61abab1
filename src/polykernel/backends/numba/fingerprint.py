"""Deterministic content fingerprints of jitted kernels (and everything they use).

A fingerprint names *behaviour*: two kernels get the same one only if the code the
compiler would see is the same, and one kernel gets the same one in every process
(whatever ``PYTHONHASHSEED``, import order or object addresses). So:

- functions hash by bytecode, constants, closure values, defaults and every global
  they reference (recursively), including attribute chains such as ``mod.helper``;
- jitted dispatchers also hash their compile options; ``@intrinsic`` objects their
  typing function; plain functions with ``@overload`` implementations those;
- sets and dicts hash their items' digests in sorted order, never ``repr``;
- code from the packages whose versions are part of every cache key (NumPy, Numba,
  llvmlite, the standard library) hashes by qualified name.

Anything else (an object we cannot read by content, such as a ctypes function or an
instance of a user class) raises :class:`Unfingerprintable`: the caller must then
treat the kernel as uncacheable, never fall back to an address.
"""

from __future__ import annotations

import contextlib
import dis
import enum
import hashlib
import sys
import types as pytypes
from typing import Any

import numpy as np

from .provenance import Unfingerprintable, _trusted, function_module

__all__ = ["Unfingerprintable", "fingerprint", "kernel_fingerprint"]

_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_CHAIN_OPS = frozenset(("LOAD_ATTR", "LOAD_METHOD"))
_MAX_DEPTH = 60


class _Hasher:
    """Feeds objects into one SHA-256; ``seen`` breaks cycles deterministically."""

    def __init__(self, stack: list[int] | None = None) -> None:
        self.h = hashlib.sha256()
        # ids of the objects being hashed (ancestors): a revisit is a cycle, named by
        # its position, so a digest never depends on what was hashed before it
        self.stack: list[int] = [] if stack is None else stack

    def tag(self, text: str) -> None:
        self.h.update(text.encode() + b"\0")

    def digest_of(self, obj: Any, depth: int) -> bytes:
        sub = _Hasher(self.stack)
        sub.feed(obj, depth)
        return sub.h.digest()

    def feed(self, obj: Any, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            raise Unfingerprintable("object graph too deep to fingerprint")
        if isinstance(obj, bool | enum.Enum) or type(obj) in _SCALARS:
            self._scalar(obj)
        elif type(obj) in (tuple, list):
            self.tag(f"{type(obj).__name__}[{len(obj)}")
            for item in obj:
                self.feed(item, depth + 1)
        elif type(obj) is dict:
            self._mapping(obj, depth)
        elif type(obj) in (set, frozenset):
            self.tag(f"{type(obj).__name__}[{len(obj)}")
            for d in sorted(self.digest_of(x, depth + 1) for x in obj):
                self.h.update(d)
        elif isinstance(obj, np.ndarray | np.generic):
            self._array(obj)
        elif isinstance(obj, np.dtype):
            self.tag(f"dtype:{obj.str}:{obj.name}")
        elif isinstance(obj, pytypes.ModuleType):
            self.tag(f"module:{obj.__name__}")
        elif isinstance(obj, pytypes.CodeType):
            self._code(obj, depth)
        else:
            self._callable_or_other(obj, depth)

    def _scalar(self, obj: Any) -> None:
        if isinstance(obj, enum.Enum):
            cls = type(obj)
            self.tag(f"enum:{cls.__module__}.{cls.__qualname__}.{obj.name}")
            if type(obj.value) in _SCALARS:
                self._scalar(obj.value)
            return
        self.tag(f"{type(obj).__name__}:{obj!r}")

    def _mapping(self, obj: dict, depth: int) -> None:
        self.tag(f"dict[{len(obj)}")
        pairs = sorted(
            (self.digest_of(k, depth + 1), self.digest_of(v, depth + 1))
            for k, v in obj.items()
        )
        for k, v in pairs:
            self.h.update(k + v)

    def _array(self, obj: Any) -> None:
        arr = np.asarray(obj)
        if arr.dtype.hasobject:
            raise Unfingerprintable("an object-dtype array")
        self.tag(f"nd:{arr.dtype.str}:{arr.shape}")
        self.h.update(hashlib.sha256(np.ascontiguousarray(arr).tobytes()).digest())

    def _code(self, code: pytypes.CodeType, depth: int) -> None:
        self.tag(f"code:{code.co_name}:{code.co_argcount}:{code.co_posonlyargcount}")
        self.tag(f"{code.co_kwonlyargcount}:{code.co_flags}")
        self.h.update(code.co_code)
        self.h.update(getattr(code, "co_exceptiontable", b""))
        for names in (code.co_names, code.co_varnames, code.co_freevars,
                      code.co_cellvars):  # fmt: skip
            self.tag(",".join(names))
        for const in code.co_consts:
            self.feed(const, depth + 1)

    def _callable_or_other(self, obj: Any, depth: int) -> None:
        if id(obj) in self.stack:
            self.tag(f"cycle:{self.stack.index(id(obj))}")
            return
        self.stack.append(id(obj))
        try:
            _feed_object(self, obj, depth)
        finally:
            self.stack.pop()


def _feed_object(hs: _Hasher, obj: Any, depth: int) -> None:
    from .objects import feed_numba_object

    if feed_numba_object(hs, obj, depth):
        return
    if isinstance(obj, pytypes.FunctionType):
        _feed_function(hs, obj, depth)
    elif isinstance(obj, type):
        _feed_class(hs, obj, depth)
    elif isinstance(obj, pytypes.BuiltinFunctionType | np.ufunc):
        module = getattr(obj, "__module__", None) or _owner_module(obj)
        if not _trusted(module):
            raise Unfingerprintable(f"builtin {obj!r} from module {module!r}")
        hs.tag(f"builtin:{module}.{getattr(obj, '__qualname__', obj.__name__)}")
    elif isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        _feed_class(hs, type(obj), depth)
        hs.feed(tuple(obj), depth + 1)
    else:
        cls = type(obj)
        raise Unfingerprintable(
            f"{cls.__module__}.{cls.__qualname__} object {_short(obj)}"
        )


def _owner_module(obj: Any) -> str | None:
    owner = getattr(obj, "__self__", None)
    if isinstance(owner, pytypes.ModuleType):
        return owner.__name__
    return getattr(type(owner), "__module__", None) if owner is not None else None


def _short(obj: Any) -> str:
    text = object.__repr__(obj)
    return text if len(text) < 80 else text[:77] + "..."


def _feed_class(hs: _Hasher, cls: type, depth: int) -> None:
    name = f"{cls.__module__}.{cls.__qualname__}"
    hs.tag(f"class:{name}")
    if _trusted(cls.__module__) or issubclass(cls, BaseException):
        # library types are pinned by version; exception classes are looked up
        # by name when a kernel raises, never compiled into it
        return
    if issubclass(cls, enum.Enum):
        hs.feed([(m.name, m.value) for m in cls], depth + 1)
    elif issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a namedtuple
        hs.feed(tuple(getattr(cls, "_fields")), depth + 1)  # noqa: B009
    else:
        raise Unfingerprintable(f"user class {name}")


def _feed_function(hs: _Hasher, fn: pytypes.FunctionType, depth: int) -> None:
    module = function_module(fn)
    hs.tag(f"fn:{module}.{fn.__qualname__}")
    if _trusted(module):
        return
    hs._code(fn.__code__, depth)
    hs.feed(fn.__defaults__, depth + 1)
    hs.feed(dict(fn.__kwdefaults__ or {}), depth + 1)
    for cell in fn.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell (a name bound later)
            hs.tag("<empty cell>")
            continue
        # outside the try: Unfingerprintable is a ValueError and must propagate
        hs.feed(contents, depth + 1)
    for chain in sorted(_global_chains(fn.__code__)):
        hs.tag("global:" + ".".join(chain))
        hs.feed(_resolve(fn, chain), depth + 1)
    from .objects import overload_implementations

    for impl in overload_implementations(fn):
        hs.tag("overload")
        hs.feed(impl, depth + 1)


_MISSING = ("<missing>",)


def _resolve(fn: pytypes.FunctionType, chain: tuple[str, ...]) -> Any:
    """The object ``a.b.c`` names inside ``fn``: a global (or builtin), or with a
    leading ``"<cell>"`` one of ``fn``'s closure cells."""
    head, *rest = chain
    if head == "<cell>":
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
        head, *rest = rest
        try:
            obj = cells[head].cell_contents
        except (KeyError, ValueError):
            return _MISSING
    elif head in fn.__globals__:
        obj = fn.__globals__[head]
    else:
        builtins = fn.__globals__.get("__builtins__", __builtins__)
        space = builtins if isinstance(builtins, dict) else vars(builtins)
        if head not in space:
            return _MISSING
        obj = space[head]
    for attr in rest:
        if not isinstance(obj, pytypes.ModuleType | type):
            break  # attributes of values are typed by Numba from the value itself
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            return _MISSING
    return obj


def _global_chains(code: pytypes.CodeType, top: bool = True) -> set[tuple[str, ...]]:
    """``("np", "sin")``-style chains read by ``code`` and its nested code objects.

    A chain starts at ``LOAD_GLOBAL`` (or, in the function's own code, at a
    closure variable) and follows the ``LOAD_ATTR``/``LOAD_METHOD`` instructions
    that directly consume it.
    """
    chains: set[tuple[str, ...]] = set()
    current: list[str] | None = None
    for ins in dis.get_instructions(code):
        if ins.opname in _CHAIN_OPS and current is not None:
            current.append(ins.argval)
            continue
        if current is not None:
            chains.add(tuple(current))
            current = None
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            current = [ins.argval]
        elif top and ins.opname == "LOAD_DEREF" and ins.argval in code.co_freevars:
            current = ["<cell>", ins.argval]
        elif ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
            chains.add((ins.argval,))
    if current is not None:
        chains.add(tuple(current))
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            chains |= _global_chains(const, top=False)
    # a bare closure variable is hashed with the closure already
    return {c for c in chains if c[0] != "<cell>" or len(c) > 2}


def fingerprint(obj: Any) -> str:
    """SHA-256 hex digest of ``obj``'s content, the same in every process.

    Raises:
        Unfingerprintable: something reachable cannot be hashed by content.

    Example:
        >>> from polykernel.backends.numba.fingerprint import fingerprint
        >>> fingerprint((1, {"a": {2, 3}})) == fingerprint((1, {"a": {3, 2}}))
        True
    """
    hs = _Hasher()
    hs.tag(f"polykernel-fingerprint-2 python {sys.version_info[:2]}")
    hs.feed(obj)
    from .objects import user_type_extensions

    extensions = user_type_extensions()
    if extensions:
        hs.tag("type extensions")
        hs.feed(extensions)
    return hs.h.hexdigest()


def kernel_fingerprint(kernel: Any) -> str:
    """SHA-256 hex digest over a jitted kernel's code *and* compile options.

    Raises:
        Unfingerprintable: the kernel reaches an object that cannot be hashed by
            content (it must then not be cached across processes).

    Example:
        >>> import numba
        >>> from polykernel.backends.numba.fingerprint import kernel_fingerprint
        >>> f = numba.njit(lambda x: x)
        >>> g = numba.njit(error_model="numpy")(lambda x: x)
        >>> kernel_fingerprint(f) != kernel_fingerprint(g)
        True
    """
    settings = ""
    with contextlib.suppress(ImportError):  # fingerprints are taken with numba
        settings = _code_settings()
    return hashlib.sha256(f"{settings}\0{fingerprint(kernel)}".encode()).hexdigest()


# Numba settings read while compiling that change the machine code.
_NUMBA_SETTINGS = (
    "BOUNDSCHECK", "OPT", "LOOP_VECTORIZE", "SLP_VECTORIZE", "FASTMATH",
    "ENABLE_AVX", "CPU_NAME", "CPU_FEATURES", "DEBUGINFO_DEFAULT",
    "LLVM_REFPRUNE_PASS", "USE_RVSDG_FRONTEND", "CAPTURED_ERRORS",
)  # fmt: skip


def _code_settings() -> str:
    """What besides the kernel decides its machine code: the versions of Numba,
    NumPy (Numba's typing follows it) and llvmlite (its LLVM), and Numba's
    code-generation settings. Part of every target name, so a process finds a
    kernel's artefact by name alone (:mod:`.cache`)."""
    import llvmlite
    import numba
    from numba.core import config as cfg

    # Numba sets its settings at import time (globals().update), unseen by a type
    # checker; repr: None and strings stay distinct.
    values = " ".join(f"{n}={getattr(cfg, n, None)!r}" for n in _NUMBA_SETTINGS)
    return (f"numba {numba.__version__} numpy {np.__version__} llvmlite "
            f"{llvmlite.__version__} {values}")  # fmt: skip
