"""The content key of a Numba-CUDA build, computed without Numba's compiler.

A new process must know whether the launcher's cache holds a kernel's PTX and
cubin before it compiles: ``compile_ptx`` loads NVVM (``ldconfig`` is started to
find it) and imports most of numba-cuda's lowering (a second on an H200).
:func:`build_key` names, as one digest, everything the images depend on:

- the kernel: Numba's content fingerprint
  (:mod:`polykernel.backends.numba.fingerprint`: bytecode, constants, closure
  values, the globals it reaches, recursively) of its Python function, with its
  compile options; Numba-CUDA's own objects are read by content too (a device
  function: its options and Python function; an ``@intrinsic``: its typing
  function), and so are the user's typing extensions, Numba's and numba-cuda's
  (an ``@overload`` for the CUDA target changes a kernel without changing its
  code). A kernel reaching an object that cannot be read by content has no key:
  it is compiled in every process, as before;
- the call: array dtypes and ranks, scalar dtypes, the architectures;
- the versions of Numba, numba-cuda, llvmlite and NumPy, of NVVM and nvJitLink
  (pip wheels; a system toolkit is named by ``CUDA_HOME``/``CUDA_PATH``), and the
  code-generation settings of ``numba.cuda``'s configuration.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..._version import installed_version
from ...launcher.cache import build_key as launcher_build_key

# The generic hasher is Numba's (the one content fingerprint of Python code in
# polykernel); numba-cuda's objects are added here, not copied there.
from ..numba.fingerprint import Unfingerprintable, _Hasher
from ..numba.objects import (
    _key_label,
    _template_content,
    _user_defined,
    canonical_options,
    user_type_extensions,
)

__all__ = ["Unfingerprintable", "build_key", "extensions_digest", "kernel_digest"]

log = logging.getLogger(__name__)

#: numba.cuda settings read while compiling that change the PTX.
_CONFIG = (
    "OPT", "DEBUGINFO_DEFAULT", "CUDA_DEBUGINFO_DEFAULT", "BOUNDSCHECK",
    "CUDA_ENABLE_NRT", "FORCE_CUDA_CC", "EXTEND_VARIABLE_LIFETIMES",
    "CUDA_DEBUG_POLY", "CUDA_DEBUG_POLY_USE_TYPED_CONST", "CUDA_INCLUDE_PATH",
)  # fmt: skip
#: What decides the images besides the kernel: (module, distribution); a loaded
#: module's ``__version__`` is read (free), else the installed distribution's.
_PACKAGES = (
    ("numba", "numba"), ("llvmlite", "llvmlite"), ("numpy", "numpy"),
    ("numba_cuda", "numba-cuda"), ("cuda.core", "cuda-core"),
    ("", "nvidia-nvvm"), ("", "nvidia-nvjitlink"),
)  # fmt: skip


class _CudaHasher(_Hasher):
    """Numba's hasher, also reading numba-cuda's dispatchers and intrinsics, and
    properties (``cuda.threadIdx.x`` resolves to one: its getter is read)."""

    def digest_of(self, obj: Any, depth: int) -> bytes:
        # Items of sets and dicts are hashed apart: by this class too.
        sub = _CudaHasher(self.stack)
        sub.feed(obj, depth)
        return sub.h.digest()

    def _callable_or_other(self, obj: Any, depth: int) -> None:
        kind = _cuda_kind(obj)
        if kind is None:
            super()._callable_or_other(obj, depth)
            return
        if id(obj) in self.stack:  # a recursive device function
            self.tag(f"cycle:{self.stack.index(id(obj))}")
            return
        self.stack.append(id(obj))
        try:
            if kind == "dispatcher":
                self.tag("cuda dispatcher")
                self.feed(canonical_options(obj.targetoptions), depth + 1)
                self.feed(obj.py_func, depth + 1)
            elif kind == "property":  # cuda.threadIdx.x: a stub class's property
                self.tag("property")
                self.feed(obj.fget, depth + 1)
            else:
                self.tag(f"cuda intrinsic:{obj._name}:{obj._prefer_literal}")
                self.feed(canonical_options(obj._ctor_kwargs), depth + 1)
                self.feed(obj._defn, depth + 1)
        finally:
            self.stack.pop()


def _cuda_kind(obj: Any) -> str | None:
    if type(obj) is property:
        return "property"
    # Looked up, never imported: a kernel's objects come from loaded modules. An
    # older numba-cuda has no intrinsic class of its own (Numba's hasher reads it).
    module = sys.modules.get("numba.cuda.dispatcher")
    dispatcher = getattr(module, "CUDADispatcher", None)
    if dispatcher is not None and isinstance(obj, dispatcher):
        return "dispatcher"
    intrinsic = getattr(sys.modules.get("numba.cuda.extending"), "_Intrinsic", None)
    if intrinsic is not None and isinstance(obj, intrinsic):
        return "intrinsic"
    return None


@functools.lru_cache(maxsize=256)
def kernel_digest(kernel: Any) -> str:
    """The content digest of a ``@cuda.jit`` kernel (memoised per kernel, as its
    compiles are).

    Raises:
        Unfingerprintable: it reaches an object that cannot be hashed by content.
    """
    hs = _CudaHasher()
    hs.tag(f"polykernel numba-cuda kernel 1 python {sys.version_info[:2]}")
    hs.feed(kernel, 0)
    return hs.h.hexdigest()


_extensions: dict[str, Any] = {"key": None, "digest": ""}


def _cuda_templates(registry: Any) -> list[tuple[str, str, Any]]:
    """``(kind, label, template)`` of every user-defined template of numba-cuda's
    typing registry (functions, attributes, and overloads of globals)."""
    found = []
    for kind, templates in (("fn", registry.functions),
                            ("attr", registry.attributes)):  # fmt: skip
        for template in templates:
            found.append((kind, _key_label(getattr(template, "key", None)), template))
    for value, typ in registry.globals:
        for template in getattr(typ, "templates", ()):
            found.append(("global", _key_label(value), template))
    return [(k, label, t) for k, label, t in found if _user_defined(t)]


def extensions_digest() -> str:
    """A digest of the user-defined typing extensions that may change any kernel:
    Numba's (``@overload`` of library functions, methods and attributes of types:
    :func:`~polykernel.backends.numba.objects.user_type_extensions`) and
    numba-cuda's own registry (``numba.cuda.extending.overload`` and friends, which
    Numba's registry does not see), read by content; recomputed when one changes.

    Raises:
        Unfingerprintable: an extension cannot be read by content.
    """
    numba_own = user_type_extensions()  # memoised by Numba's registry's size
    registry = getattr(sys.modules.get("numba.cuda.typing.templates"),
                       "builtin_registry", None)  # fmt: skip
    sizes = tuple(len(getattr(registry, name, ()))
                  for name in ("functions", "attributes", "globals"))  # fmt: skip
    key = (sizes, numba_own)  # the same frozenset object while Numba's is unchanged
    if _extensions["key"] != key:
        cuda_own = _cuda_templates(registry) if registry is not None else []
        content = frozenset(
            (k, label, _template_content(t)) for k, label, t in cuda_own
        )
        hs = _CudaHasher()
        hs.feed((numba_own, content), 0)
        _extensions.update(key=key, digest=hs.h.hexdigest())
    return _extensions["digest"]


@functools.cache
def _versions() -> tuple[tuple[str, str], ...]:
    found = []
    for module, dist in _PACKAGES:
        version = getattr(sys.modules.get(module), "__version__", None)
        found.append((dist, str(version or installed_version(dist) or "absent")))
    return tuple(found)


def _settings() -> list[tuple[str, str]]:
    try:
        from numba.cuda.core import config  # pyright: ignore[reportMissingImports]
    except ImportError:  # an older numba-cuda reads Numba's own configuration
        from numba.core import config
    found = [(name, repr(getattr(config, name, None))) for name in _CONFIG]
    found += [(v, os.environ.get(v, "")) for v in ("CUDA_HOME", "CUDA_PATH")]
    return found


def build_key(
    kernel: Any,
    dtypes: Sequence[str],
    ranks: Sequence[int],
    arches: Sequence[str],
    scalar_dtypes: Sequence[str] = (),
) -> str | None:
    """The launcher's build key of ``kernel`` compiled for these arrays, scalars
    and architectures; None when the kernel cannot be read by content."""
    try:
        digest, extensions = kernel_digest(kernel), extensions_digest()
    except (Unfingerprintable, TypeError) as err:  # TypeError: an unhashable kernel
        log.debug("numba_cuda: no content key, compiled in-process only: %s", err)
        return None
    parts = {
        "kernel": digest,
        "extensions": extensions,
        "arrays": [[str(d), int(r)] for d, r in zip(dtypes, ranks, strict=True)],
        "scalars": [str(d) for d in scalar_dtypes],
        "arches": [str(a) for a in arches],
        "versions": list(_versions()),
        "settings": _settings(),
    }
    return launcher_build_key("numba_cuda", parts)
