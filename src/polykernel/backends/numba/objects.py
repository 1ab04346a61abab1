"""How :mod:`.fingerprint` reads Numba objects by content.

- a dispatcher: its compile options (canonical: sets sorted, dicts by key) and its
  Python function;
- an ``@intrinsic``: its name, options and typing function (which holds the code
  generator);
- a plain function that Numba compiles through ``@overload`` (``register_jitable``
  included): the overload implementations registered for it;
- a Numba type: its name.

:func:`user_type_extensions` collects the typing extensions that can change *any*
kernel (``@overload_method``/``@overload_attribute`` on types, and ``@overload``
of library functions such as ``operator.add``) when user code defines them.

Nothing here imports Numba: a process that never imported it has nothing to read.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["feed_numba_object", "overload_implementations", "user_type_extensions"]

_index: dict[str, Any] = {"size": -1, "by_id": {}, "ext_size": (-1, -1), "ext": None}


def _numba() -> Any:
    return sys.modules.get("numba")


def feed_numba_object(hs: Any, obj: Any, depth: int) -> bool:
    """Feed ``obj`` if it is a Numba object we know; return False otherwise."""
    if _numba() is None:
        return False
    from numba.core import types
    from numba.core.dispatcher import Dispatcher
    from numba.core.extending import _Intrinsic

    if isinstance(obj, Dispatcher):
        hs.tag(f"dispatcher:{type(obj).__module__}.{type(obj).__qualname__}")
        hs.feed(canonical_options(obj.targetoptions), depth + 1)
        hs.feed(canonical_options(getattr(obj, "locals", None) or {}), depth + 1)
        hs.feed(obj.py_func, depth + 1)
        return True
    if isinstance(obj, _Intrinsic):
        hs.tag(f"intrinsic:{obj._name}:{obj._prefer_literal}")
        hs.feed(canonical_options(obj._ctor_kwargs), depth + 1)
        hs.feed(obj._defn, depth + 1)
        return True
    if types.Type in type(obj).__mro__:  # not isinstance: Type is an ABC (slow)
        text = str(obj)
        if "0x" in text:  # a type naming an object by address
            from .provenance import Unfingerprintable

            raise Unfingerprintable(f"Numba type {text}")
        hs.tag(f"nbtype:{type(obj).__qualname__}:{text}")
        return True
    return False


def canonical_options(options: dict) -> tuple:
    """Options as a sorted tuple of ``(name, value)``; sets become sorted tuples and
    Numba types their names, so the result hashes alike in every process."""
    return tuple((name, _canonical_value(options[name])) for name in sorted(options))


def _canonical_value(value: Any) -> Any:
    if type(value) in (bool, int, float, str, type(None)):
        return value
    if isinstance(value, set | frozenset):
        return tuple(sorted((_canonical_value(v) for v in value), key=repr))
    if isinstance(value, dict):
        return canonical_options(value)
    if isinstance(value, list | tuple):
        return tuple(_canonical_value(v) for v in value)
    numba = _numba()
    if numba is not None:
        from numba.core import types

        if types.Type in type(value).__mro__:
            return f"nbtype:{value}"
    return value


def _registry() -> Any:
    from numba.core.typing.templates import builtin_registry

    return builtin_registry


def overload_implementations(fn: Any) -> list:
    """The ``@overload`` implementations (and options) registered for ``fn``.

    Raises:
        Unfingerprintable: ``fn`` has a typing template we cannot read by content
            (a low-level ``@type_callable``/``@lower_builtin`` extension).
    """
    if _numba() is None:
        return []
    registry = _registry()
    if _index["size"] != len(registry.globals):
        by_id: dict[int, list] = {}
        for value, typ in registry.globals:
            by_id.setdefault(id(value), []).append(typ)
        _index.update(size=len(registry.globals), by_id=by_id)
    found = []
    for typ in _index["by_id"].get(id(fn), ()):
        for template in getattr(typ, "templates", ()):
            found.append(_template_content(template))
    return found


def _template_functions(template: Any) -> list:
    """The Python functions that decide what a typing template does: its
    ``@overload``/``@intrinsic`` function, the functions in its class body and the
    functions those close over (``@type_callable`` wraps the user's one so)."""
    import types as pytypes

    found = []
    for attr in ("_overload_func", "_definition_func"):
        impl = getattr(template, attr, None)
        if impl is not None:
            found.append(getattr(impl, "__func__", impl))
    for value in vars(template).values():
        fn = getattr(value, "__func__", value)
        if isinstance(fn, pytypes.FunctionType) and fn not in found:
            found.append(fn)
            for cell in fn.__closure__ or ():
                inner = cell.cell_contents
                if isinstance(inner, pytypes.FunctionType) and inner not in found:
                    found.append(inner)
    return found


def _template_content(template: Any) -> tuple:
    """What to hash for a template: its user-written functions and options."""
    from .provenance import Unfingerprintable, _trusted, function_module

    functions = _template_functions(template)
    user = tuple(f for f in functions if not _trusted(function_module(f)))
    if not user and _user_defined(template):
        raise Unfingerprintable(
            f"typing template {template.__module__}.{template.__qualname__} "
            f"has no Python function to read"
        )
    options = canonical_options(dict(getattr(template, "_jit_options", {}) or {}))
    inline = getattr(getattr(template, "_inline", None), "value", None)
    attr = getattr(template, "_attr", None)
    return (user, options, str(inline), str(attr))


def _user_defined(template: Any) -> bool:
    from .provenance import _trusted, function_module

    functions = _template_functions(template)
    if not functions:
        return not _trusted(template.__module__)
    return any(not _trusted(function_module(f)) for f in functions)


def _library_function(key: Any) -> bool:
    """True for a function of a library whose version is in every key."""
    import types as pytypes

    import numpy as np

    from .provenance import _trusted

    kinds = (pytypes.FunctionType, pytypes.BuiltinFunctionType, np.ufunc, type)
    return isinstance(key, kinds) and _trusted(getattr(key, "__module__", None))


def _key_label(key: Any) -> str:
    if isinstance(key, type):
        return f"{key.__module__}.{key.__qualname__}"
    return f"{type(key).__qualname__}:{getattr(key, '__qualname__', key)}"


def user_type_extensions() -> frozenset:
    """User-defined typing extensions that may apply to any kernel (see module)."""
    if _numba() is None:
        return frozenset()
    registry = _registry()
    size = (len(registry.functions), len(registry.attributes))
    if _index["ext_size"] == size:
        return _index["ext"]
    found = set()
    for kind, templates in (("fn", registry.functions), ("attr", registry.attributes)):
        for template in templates:
            if not _user_defined(template):
                continue
            key = getattr(template, "key", None)
            if kind == "fn" and not _library_function(key):
                continue  # a user function or intrinsic: hashed where it is used
            found.add((kind, _key_label(key), _template_content(template)))
    result = frozenset(found)
    _index.update(ext_size=size, ext=result)
    return result
