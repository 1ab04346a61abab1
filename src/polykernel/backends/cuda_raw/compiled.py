"""``CompiledModule``: a loaded shared library and its FFI handler symbols.

The reference API's module type.
:class:`~polykernel.backends.cuda_raw.kernel.NativeModule`
(what ``load_*`` returns) is a ``CompiledModule``, so ``mod.path``,
``mod.content_hash``, ``mod.function_names`` and ``mod.get_handler(name)`` work on
every loaded module. A ``CompiledModule`` can also be made from any library built
with polykernel's (``polykernel_ffi_<f>``) or the reference's (``be_<f>``) wrappers,
and registered by hand with
:func:`~polykernel.backends.cuda_raw.runtime.register_ffi_target`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import KernelLoadError, KernelLookupError, KernelTypeError
from .codegen import handler_symbol

__all__ = ["CompiledModule", "load_library"]


def _symbols(fname: str) -> tuple[str, str]:
    # Ours first, then the reference's, so a library built by either can be wrapped.
    return handler_symbol(fname), f"be_{fname}"


def load_library(path: str | os.PathLike) -> ctypes.CDLL:
    """``dlopen`` ``path``; a failure names the file and the loader's reason.

    Raises:
        KernelLoadError: (an ``OSError``) the file is missing or cannot be loaded.
    """
    path = str(path)
    if not os.path.exists(path):
        raise KernelLoadError(
            f"polykernel.native: shared library '{path}' does not exist. It may have "
            "been removed from the cache (polykernel cache clear); load the module "
            "again to rebuild it."
        )
    try:
        return ctypes.CDLL(path)
    except OSError as err:
        raise KernelLoadError(
            f"polykernel.native: cannot load '{path}': {err}. A missing dependency "
            "(e.g. libcudart) is the usual cause; check `ldd` on the file."
        ) from err


class CompiledModule:
    """A loaded shared library exporting XLA FFI handlers, one per function.

    Args:
        so_path: Path of the shared library.
        function_names: Functions whose handler symbols the library exports.

    Raises:
        KernelLoadError: the library cannot be loaded or lacks a handler symbol.

    Example:
        >>> import polykernel as pk
        >>> from polykernel import CompiledModule
        >>> src = '''void zero(pk::Tensor& y) {
        ...   std::memset(y.data_ptr(), 0, y.nbytes());
        ... }'''
        >>> built = pk.load_cpp_inline("doc_compiled", src, ["zero"])
        >>> mod = CompiledModule(built.path, ["zero"])  # the library built above
        >>> mod.get_handler("zero") is not None
        True
    """

    def __init__(
        self, so_path: str | os.PathLike, function_names: Sequence[str]
    ) -> None:
        if not isinstance(so_path, str | os.PathLike):
            raise KernelTypeError(
                f"CompiledModule: so_path must be the shared library's path (str or "
                f"os.PathLike), got {type(so_path).__name__} {so_path!r}."
            )
        names = _iterable(function_names)
        if isinstance(function_names, str) or not all(
            isinstance(n, str) for n in names
        ):
            raise KernelTypeError(
                "CompiledModule: function_names must be a list of function names "
                f"(str), got {type(function_names).__name__} {function_names!r}."
            )
        self.name = Path(so_path).stem
        self.library = str(so_path)
        self._handle = load_library(so_path)
        self.functions: dict[str, Any] = {}
        for fname in names:
            self.functions[fname] = _resolve_handler(self._handle, self.library, fname)

    @property
    def path(self) -> str:
        """Path of the loaded shared library."""
        return self.library

    @property
    def content_hash(self) -> str:
        """``"sha256:<16 hex>"`` of the library's bytes (read once, then memoised).

        The content identity used by ``register_ffi_target`` when no ``content_id``
        is given: a rebuilt library at the same path gets a new hash.
        """
        cached = self.__dict__.get("_content_hash")
        if cached is None:
            try:
                digest = hashlib.sha256(Path(self.library).read_bytes()).hexdigest()
                cached = f"sha256:{digest[:16]}"
            except OSError:
                cached = f"path:{self.library}"
            self.__dict__["_content_hash"] = cached
        return cached

    @property
    def function_names(self) -> list[str]:
        """Names of the functions this module exports, in load order."""
        return list(self.functions)

    def get_handler(self, name: str) -> Any:
        """The ctypes pointer of ``name``'s FFI handler (``XLA_FFI_Error*(frame*)``).

        Raises:
            KernelLookupError: (a ``KeyError``) the module exports no such function.
        """
        if name not in self.functions:
            raise KernelLookupError(
                f"native module '{self.name}' has no function {name!r}; it exports "
                f"{self.function_names}."
            )
        return _resolve_handler(self._handle, self.library, name)

    def __repr__(self) -> str:
        return f"CompiledModule(path={self.library!r}, functions={self.function_names})"


def _resolve_handler(handle: ctypes.CDLL, library: str, fname: str) -> Any:
    for symbol in _symbols(fname):
        try:
            fn = getattr(handle, symbol)
        except AttributeError:
            continue
        fn.restype = ctypes.c_void_p
        fn.argtypes = [ctypes.c_void_p]
        return fn
    tried = ", ".join(_symbols(fname))
    raise KernelLoadError(
        f"polykernel.native: '{library}' exports no FFI handler for {fname!r} (tried "
        f"{tried}). Was it built by load_cpp_*/load_cuda_* with {fname!r} listed in "
        "`functions`?"
    )


def _iterable(value: Any) -> Sequence:
    """``value`` as a list when it is iterable, else a list holding it (a bad item)."""
    try:
        return list(value)
    except TypeError:
        return [value]
