"""Compile a user's ``@njit`` kernel for exactly what a handler passes it.

The handler passes C-contiguous arrays (inputs, then outputs, of the dtypes the
kernel sees: see :meth:`Signature.view_dtype`) positionally and the scalar
attributes by keyword. Numba's own argument folding (defaults, ``*args``) maps
that call onto the kernel's parameters; :class:`Binding` records, per folded
parameter, where its value comes from, so the handler can build the call.

Every kernel is compiled through a private copy of the user's dispatcher, with
Numba's ``no_cpython_wrapper`` and ``no_cfunc_wrapper`` target options: the handler
calls the kernel's native function, so the wrappers that let Python (or a C
caller) call it would be built, optimised and code-generated for nothing (about
50-60 ms of a first compile here, most of it the CPython wrapper). The copy is
never called from Python (it has no wrapper to call), and the user's dispatcher
is left as it was: calling it from Python compiles it as Numba always does. The
copy has no disk cache either: Numba's cache can hand back code whose symbols
collide with another kernel's in this process (numba/numba#10486), and we never
build on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...ffi.handler_ir.signature import Signature

__all__ = ["NO_WRAPPERS", "Binding", "Prepared", "compile_kernel",
           "compile_prepared", "from_numba_cache", "prepare"]  # fmt: skip


@dataclass(frozen=True)
class Source:
    """Where one folded parameter's value comes from."""

    kind: str  # "buffer", "attr", "omitted" or "star"
    index: int = -1  # buffer or attribute index
    parts: tuple[Source, ...] = ()  # for "star"
    nbtype: Any = None


@dataclass
class Binding:
    """A compiled kernel and how the handler calls it."""

    cres: Any  # numba CompileResult (library, fndesc)
    sources: tuple[Source, ...]
    dispatcher: Any


@dataclass(frozen=True)
class Prepared:
    """What is known of a kernel's call before Numba compiles it: the dispatcher
    that compiles it, where each parameter's value comes from, the Numba types."""

    dispatcher: Any
    sources: tuple[Source, ...]
    argtypes: tuple[Any, ...]


#: Target options of the private copy (see the module's docstring).
NO_WRAPPERS = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


def _private_copy(dispatcher: Any) -> Any:
    """The dispatcher the kernel is compiled with: the user's function, locals,
    options and compiler pipeline, no wrappers and no disk cache."""
    from numba.core.registry import CPUDispatcher

    compiler = getattr(dispatcher, "_compiler", None)
    more = {}
    if compiler is not None and getattr(compiler, "pipeline_class", None):
        more["pipeline_class"] = compiler.pipeline_class
    return CPUDispatcher(
        dispatcher.py_func,
        locals=dict(getattr(dispatcher, "locals", {}) or {}),
        targetoptions={**dispatcher.targetoptions, **NO_WRAPPERS},
        **more,
    )


def compile_kernel(dispatcher: Any, sig: Signature, private: dict) -> Binding:
    """Compile ``dispatcher`` for ``sig``; ``private`` memoises private copies.

    Raises:
        TypeError: the kernel's parameters do not take this call.
        numba.core.errors.NumbaError (and others): the kernel does not compile
            for these types; the caller words the error.
    """
    return compile_prepared(prepare(dispatcher, sig, private))


def prepare(dispatcher: Any, sig: Signature, private: dict) -> Prepared:
    """The call of ``dispatcher`` for ``sig``, folded onto its parameters.

    Raises:
        TypeError: the kernel's parameters do not take this call.
    """
    import numpy as np
    from numba.core import types
    from numba.np.numpy_support import from_dtype

    # By id: whoever passes ``private`` holds the user's dispatcher (NumbaKernel).
    copy = private.get(id(dispatcher))
    if copy is None:
        copy = private[id(dispatcher)] = _private_copy(dispatcher)
    dispatcher = copy
    markers = []
    for dtype, rank in sig.buffers:
        nbtype = types.Array(from_dtype(np.dtype(sig.view_dtype(dtype))), rank, "C")
        markers.append(Source("buffer", len(markers), nbtype=nbtype))
    kw = {
        name: Source("attr", i, nbtype=from_dtype(np.dtype(dtype)))
        for i, (name, dtype) in enumerate(sig.attrs)
    }
    sources = tuple(_fold(dispatcher.py_func, markers, kw))
    return Prepared(dispatcher, sources, tuple(s.nbtype for s in sources))


def compile_prepared(prepared: Prepared) -> Binding:
    """Compile the kernel :func:`prepare` described (see :func:`compile_kernel`)."""
    prepared.dispatcher.compile(prepared.argtypes)
    cres = prepared.dispatcher.overloads[prepared.argtypes]
    return Binding(cres, prepared.sources, prepared.dispatcher)


def _fold(py_func: Any, args: list[Source], kws: dict[str, Source]) -> list[Source]:
    """Map ``py_func(*args, **kws)`` onto its parameters, in order (Numba's rules:
    omitted defaults become ``Omitted`` and ``*args`` one ``StarArgTuple``)."""
    from numba.core import types, utils

    pysig = utils.pysignature(py_func)  # pyright: ignore[reportPrivateImportUsage]
    bound = pysig.bind(*args, **kws)
    sources = []
    for param in pysig.parameters.values():
        if param.kind == param.VAR_KEYWORD:
            if bound.arguments.get(param.name):
                raise TypeError("a **kwargs kernel parameter cannot take attributes")
            continue
        if param.kind == param.VAR_POSITIONAL:
            values = tuple(bound.arguments.get(param.name, ()))
            nbtype = types.StarArgTuple(tuple(v.nbtype for v in values))
            sources.append(Source("star", parts=values, nbtype=nbtype))
        elif param.name in bound.arguments:
            sources.append(bound.arguments[param.name])
        else:
            omitted = types.Omitted(param.default)
            sources.append(Source("omitted", nbtype=omitted))
    return sources


def from_numba_cache(library: Any) -> list[str]:
    """Names of libraries linked into ``library`` that Numba loaded from its disk
    cache (their symbol names come from another process)."""
    found, stack, seen = [], [library], set()
    while stack:
        lib = stack.pop()
        if id(lib) in seen:
            continue
        seen.add(id(lib))
        if getattr(lib, "_disable_inspection", False):
            found.append(lib.name)
        stack.extend(getattr(lib, "_linking_libraries", ()))
    return found
