"""Which kernel an entry measured: a digest of the generator, the code it reaches and
the versions it ran with.

A measured choice is only as good as the kernel it measured: edit the kernel, or
upgrade the package that compiles it, and the old winner says nothing about the new
code. Every entry records, per backend it measured, :func:`kernel_identity` — a
SHA-256 over

- the generator's source text, and, followed from it, the source of every Python
  function it reaches through its closure, its globals, its default values and the
  attributes it reads from modules of its own package (a Numba dispatcher counts as
  its Python function; nested functions are part of their parent's source);
- the simple values it reaches the same way (strings such as a C++ source, numbers,
  tuples of them);
- its launch parameters and their candidate values;
- the versions of polykernel and of the backend's packages.

Source text, not bytecode, so the identity is the same on every Python version; a
function whose source cannot be read (typed at a prompt) is digested by its code
object instead. Files a generator reads at run time are not followed: tune again
after editing one. The walk is bounded (:data:`MAX_OBJECTS`).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import linecache
import os
import sys
import sysconfig
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .._version import __version__
from . import values

__all__ = ["generator_digest", "kernel_identity", "package_versions"]

#: At most this many functions are followed from one generator.
MAX_OBJECTS = 200
#: Distribution names of modules whose import name differs.
_DISTRIBUTIONS = {"warp": "warp-lang", "numba_cuda": "numba-cuda"}


def _last_line(code: types.CodeType) -> int:
    last = code.co_firstlineno
    for _, _, line in code.co_lines():
        last = max(last, line or 0)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            last = max(last, _last_line(const))
    return last


def _source(fn: types.FunctionType) -> str:
    """The lines of ``fn``'s source, from its first line (decorators included) to
    the last line its code (nested functions included) spans — read from the
    file's cached lines, without tokenizing it as ``inspect.getsource`` does (ten
    times faster); its code object's text when there is no file."""
    code = fn.__code__
    lines = linecache.getlines(code.co_filename, fn.__globals__)
    if not lines or code.co_firstlineno > len(lines):
        return _code_text(code)
    return "".join(lines[code.co_firstlineno - 1 : _last_line(code)])


def _code_text(code: types.CodeType) -> str:
    parts = [code.co_code.hex(), repr(code.co_names)]
    for const in code.co_consts:
        parts.append(
            _code_text(const)
            if isinstance(const, types.CodeType)
            else _simple(const) or ""
        )
    return "|".join(parts)


def _simple(value: Any) -> str | None:
    """The text of a value worth digesting (str, bytes, numbers, tuples of them)."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return repr(value)
    if isinstance(value, tuple) and len(value) <= 64:
        inner = [_simple(v) for v in value]
        return None if None in inner else f"({','.join(t or '' for t in inner)})"
    return None


def _names(code: types.CodeType) -> set[str]:
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


def _function_of(obj: Any) -> types.FunctionType | None:
    """The Python function behind ``obj`` (a function, method, partial's function,
    Numba dispatcher), or None."""
    obj = inspect.unwrap(obj) if callable(obj) else obj
    if isinstance(obj, types.MethodType):
        obj = obj.__func__
    if isinstance(obj, types.FunctionType):
        return obj
    py_func = getattr(obj, "py_func", None)  # a Numba dispatcher
    return py_func if isinstance(py_func, types.FunctionType) else None


def _own_prefix(module_name: str | None) -> str:
    """The modules that count as the generator's own code: its top-level package
    (for polykernel's catalog, the catalog: the rest of polykernel is versioned)."""
    name = module_name or ""
    if name == "polykernel" or name.startswith("polykernel."):
        return ".".join(name.split(".")[:2])
    return name.split(".", 1)[0]


def _within(module_name: str | None, prefix: str) -> bool:
    name = module_name or ""
    return name == prefix or name.startswith(prefix + ".")


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {
        paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths
    }
    return tuple(sorted(os.path.realpath(p) + os.sep for p in found))


def _is_library(fn: types.FunctionType) -> bool:
    """Installed code (the standard library, site-packages) or polykernel's own:
    covered by the versions in the identity, not followed."""
    if _within(fn.__module__, "polykernel"):
        return True
    filename = os.path.realpath(fn.__code__.co_filename)
    return filename.startswith(_library_dirs())


class _Walk:
    """Digests functions and values reachable from a generator, each once."""

    def __init__(self, own: str) -> None:
        self.own = own
        self.hash = hashlib.sha256()
        self.seen: set[int] = set()

    def add(self, label: str, text: str) -> None:
        self.hash.update(f"{label}\0{len(text)}\0{text}\0".encode("utf-8", "replace"))

    def value(self, label: str, obj: Any) -> None:
        if isinstance(obj, functools.partial):
            self.value(f"{label}.func", obj.func)
            self.add(f"{label}.args", repr([_simple(a) for a in obj.args]))
            for k, v in sorted(obj.keywords.items()):
                self.value(f"{label}.{k}", v)
            return
        simple = _simple(obj)
        if simple is not None:
            self.add(label, simple)
            return
        fn = _function_of(obj)
        if fn is not None:
            self.function(fn)
        elif isinstance(obj, types.ModuleType):
            return  # its attributes are followed by name from the code reading them
        else:
            call = vars(type(obj)).get("__call__")
            if isinstance(call, types.FunctionType):
                self.function(call)

    def function(self, fn: types.FunctionType, root: bool = False) -> None:
        if id(fn) in self.seen or len(self.seen) >= MAX_OBJECTS:
            return
        if not root and not _within(fn.__module__, self.own) and _is_library(fn):
            return
        self.seen.add(id(fn))
        # Not its module's name: a file imported under another name is the same code.
        where = fn.__qualname__
        self.add(where, _source(fn))
        for i, default in enumerate(fn.__defaults__ or ()):
            self.value(f"{where}.default{i}", default)
        for name, default in sorted((fn.__kwdefaults__ or {}).items()):
            self.value(f"{where}.{name}", default)
        for name, cell in zip(
            fn.__code__.co_freevars, fn.__closure__ or (), strict=False
        ):
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            self.value(f"{where}.{name}", content)
        names = sorted(_names(fn.__code__))
        scope = fn.__globals__
        for name in names:
            if name not in scope:
                continue
            obj = scope[name]
            if isinstance(obj, types.ModuleType):
                if _within(obj.__name__, self.own):
                    for attr in names:
                        if attr in vars(obj):
                            self.value(f"{name}.{attr}", vars(obj)[attr])
                continue
            self.value(f"{where}:{name}", obj)

    def digest(self) -> str:
        return self.hash.hexdigest()


def generator_digest(generator: Callable[..., Any]) -> str:
    """The SHA-256 (hex) of ``generator``'s source and what it reaches.

    Example:
        >>> from polykernel.dispatch.identity import generator_digest
        >>> def gen(outs, BLOCK, **kw):
        ...     return lambda x: x
        >>> generator_digest(gen) == generator_digest(gen)
        True
    """
    fn = _function_of(generator)
    module = getattr(fn or generator, "__module__", None) or type(generator).__module__
    walk = _Walk(_own_prefix(module))
    if fn is not None and not isinstance(generator, functools.partial):
        walk.function(fn, root=True)
    else:
        walk.value("generator", generator)
    return walk.digest()


@functools.lru_cache(maxsize=64)
def _version_of(module: str) -> str:
    loaded = sys.modules.get(module)
    version = getattr(loaded, "__version__", None)
    if isinstance(version, str):
        return version
    for dist in (_DISTRIBUTIONS.get(module), module, module.replace("_", "-")):
        if dist is None:
            continue
        try:
            return importlib.metadata.version(dist)
        except (importlib.metadata.PackageNotFoundError, ValueError):
            continue
    return "absent"


def package_versions(modules: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """``((module, version), ...)`` of installed packages (``absent`` when not)."""
    return tuple((m, _version_of(m)) for m in sorted(set(modules)))


def kernel_identity(
    generator: Callable[..., Any],
    tune: Sequence[tuple[str, Sequence[Any]]],
    modules: Iterable[str] = (),
) -> str:
    """The identity (16 hex digits) of one registered kernel: its generator's
    digest, its launch parameters with their candidates, and the versions of
    polykernel and the packages in ``modules``."""
    h = hashlib.sha256()
    h.update(generator_digest(generator).encode())
    for name, candidates in tune:
        h.update(f"\0{name}=".encode())
        h.update(",".join(values.token(v) for v in candidates).encode())
    h.update(f"\0polykernel={__version__}".encode())
    for module, version in package_versions(modules):
        h.update(f"\0{module}={version}".encode())
    return h.hexdigest()[:16]
