"""``load_cpp_inline`` / ``load_cpp_file`` / ``load_cuda_inline`` / ``load_cuda_file``.

Compile (or fetch from the cache), ``dlopen`` and register every function as an XLA
FFI target, then return a callable :class:`NativeModule`.

The signatures are the reference API's (same positional order, same keywords and
defaults), plus polykernel's ``options=CompileOptions(...)`` and ``vmap_method``.
Every argument is checked here, before any work, so a wrong type is a
``TypeError`` and a wrong value a ``ValueError`` naming the argument (both also
polykernel errors). Target naming and reloading: see :mod:`.build`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...errors import (
    KernelRegistrationError,
    KernelSourceNotFoundError,
    KernelTypeError,
)
from ...native.compiler import CompileOptions
from ...platforms import LoweringPlatform
from ...types import VmapMethod
from .build import load
from .kernel import NativeModule
from .request import Functions, LoadKeywords, LoadRequest, keywords_for

__all__ = [
    "load_cpp_file",
    "load_cpp_inline",
    "load_cuda_file",
    "load_cuda_inline",
    "load_source",
    "read_source",
]


def load_cpp_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    functions: Functions = None,
    *,
    extra_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    force_rebuild: bool = False,
    replace: bool = False,
    auto_register: bool = True,
    target_prefix: str | None = None,
    options: CompileOptions | None = None,
    vmap_method: VmapMethod = "sequential",
) -> NativeModule:
    """Compile C++ source for the CPU and register its functions with XLA.

    Args:
        name: module name; functions become FFI targets ``"<name>.<function>"``.
        cpp_sources: C++ source text (or several, joined).
        functions: ``{"f": ["arg", "ret", "attr.alpha:float32"]}``; names whose spec
            is inferred from the ``void f(...)`` signature; or ``None``: the functions
            marked ``// @pk f`` (or the reference's ``// @BE f``) in the source.
        extra_cflags: more compiler flags (``CompileOptions.extra_cflags``).
        extra_ldflags: linker flags, e.g. ``["-lm"]`` (``CompileOptions.ldflags``).
        extra_include_paths: ``-I`` directories (``CompileOptions.include_paths``).
        build_directory: build there and keep the files (the library is also
            copied into the cache); default a temporary directory.
        verbose: print the compiler command and its output (or the cache hit).
        force_rebuild: compile even if the cache holds this build.
        replace: accepted for the reference's signature: a reload with different
            code under this name always re-points ``"<target_prefix>.<function>"``
            to the new build (see :mod:`polykernel.backends.cuda_raw.build`).
        auto_register: register ``"<target_prefix>.<function>"`` for raw
            ``jax.ffi.ffi_call``; the module's own callables work either way.
        target_prefix: prefix of those names (default ``name``).
        options: polykernel's compiler options; a setting given both here and by a
            keyword above is a ``TypeError``.
        vmap_method: how ``jax.vmap`` calls the kernel (default one call per item).

    Returns:
        The module; ``mod.f(x, outs=..., alpha=1.0)`` calls ``f``.

    Example:
        >>> from polykernel import load_cpp_inline
        >>> src = '''
        ... void twice(const pk::Tensor& x, pk::Tensor& y) {
        ...   const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
        ...   for (int64_t i = 0; i < x.numel(); ++i) b[i] = 2 * a[i];
        ... }'''
        >>> mod = load_cpp_inline("doc_twice", src, ["twice"])
        >>> import jax, jax.numpy as jnp
        >>> x = jnp.arange(3.0, dtype=jnp.float32)
        >>> mod.twice(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)).tolist()
        [0.0, 2.0, 4.0]
    """
    keywords = LoadKeywords(
        extra_cflags=extra_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_paths=extra_include_paths,
        build_directory=build_directory,
        verbose=verbose,
        force_rebuild=force_rebuild,
        replace=replace,
        auto_register=auto_register,
        target_prefix=target_prefix,
        options=options,
        vmap_method=vmap_method,
    )
    request = LoadRequest.resolve(
        "load_cpp_inline", LoweringPlatform.CPU, name, cpp_sources, functions, keywords
    )
    return load(request)


def load_cuda_inline(
    name: str,
    cuda_sources: str | Sequence[str],
    functions: Functions = None,
    *,
    extra_cuda_cflags: Sequence[str] | None = None,
    extra_ldflags: Sequence[str] | None = None,
    extra_include_paths: Sequence[str] | None = None,
    build_directory: str | None = None,
    verbose: bool = False,
    compute_capability: str | Sequence[str] | None = None,
    force_rebuild: bool = False,
    replace: bool = False,
    auto_register: bool = True,
    target_prefix: str | None = None,
    optimization_level: int = 3,
    use_fast_math: bool = False,
    allow_cuda_graph: bool = True,
    options: CompileOptions | None = None,
    vmap_method: VmapMethod = "sequential",
) -> NativeModule:
    """Compile CUDA source with nvcc and register its functions for the GPU.

    Same arguments as :func:`load_cpp_inline` (``extra_cuda_cflags`` instead of
    ``extra_cflags``), plus:

    Args:
        compute_capability: target GPU(s), e.g. ``"sm_86"`` or ``["sm_80",
            "sm_90"]`` (``CompileOptions.cuda_arch``); default
            ``$POLYKERNEL_CUDA_ARCH``, else the visible GPU.
        optimization_level: ``-O<n>``, 0-3 (``CompileOptions.optimization``).
        use_fast_math: ``--use_fast_math`` (``CompileOptions.fast_math``).
        allow_cuda_graph: register the handlers command-buffer compatible, so XLA
            may capture chains and loops of calls in one CUDA graph; pass ``False``
            for a kernel with host-side effects (host synchronisation, allocation,
            data-dependent launches) that must run on every call.

    A ``cudaStream_t`` parameter (or the reference's ``int64_t stream``) receives
    XLA's stream.

    Example:
        >>> from polykernel import load_cuda_inline
        >>> src = '''
        ... __global__ void scale_kernel(const float* x, float* y, int64_t n) {
        ...   int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
        ...   if (i < n) y[i] = 2 * x[i];
        ... }
        ... void scale(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream) {
        ...   int64_t n = x.numel();
        ...   scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
        ...       x.data_ptr<float>(), y.data_ptr<float>(), n);
        ... }'''
        >>> mod = load_cuda_inline("doc_scale", src, ["scale"],
        ...                        compute_capability="sm_80")
        >>> mod.function_names  # built and registered; calling it needs a GPU
        ['scale']
    """
    keywords = LoadKeywords(
        extra_cuda_cflags=extra_cuda_cflags,
        extra_ldflags=extra_ldflags,
        extra_include_paths=extra_include_paths,
        build_directory=build_directory,
        verbose=verbose,
        compute_capability=compute_capability,
        force_rebuild=force_rebuild,
        replace=replace,
        auto_register=auto_register,
        target_prefix=target_prefix,
        optimization_level=optimization_level,
        use_fast_math=use_fast_math,
        allow_cuda_graph=allow_cuda_graph,
        options=options,
        vmap_method=vmap_method,
    )
    request = LoadRequest.resolve(
        "load_cuda_inline", LoweringPlatform.CUDA, name, cuda_sources, functions,
        keywords,
    )  # fmt: skip
    return load(request)


def load_cpp_file(
    filepath: str | os.PathLike,
    functions: Functions = None,
    *,
    name: str | None = None,
    **kwargs: Any,
) -> NativeModule:
    """Like :func:`load_cpp_inline` for a source file; its directory is on ``-I``.

    ``name`` defaults to the file's stem; ``kwargs`` are those of
    :func:`load_cpp_inline`.

    Example:
        >>> from pathlib import Path
        >>> from polykernel import load_cpp_file
        >>> _ = Path("add.cpp").write_text('''
        ... void add(const pk::Tensor& x, const pk::Tensor& y, pk::Tensor& out) {
        ...   const float* a = x.data_ptr<float>();
        ...   const float* b = y.data_ptr<float>();
        ...   float* c = out.data_ptr<float>();
        ...   for (int64_t i = 0; i < x.numel(); ++i) c[i] = a[i] + b[i];
        ... }''')
        >>> mod = load_cpp_file("add.cpp", ["add"])
        >>> mod.name, mod.function_names
        ('add', ['add'])
    """
    return _load_file("load_cpp_file", LoweringPlatform.CPU, filepath, functions,
                      name, kwargs)  # fmt: skip


def load_cuda_file(
    filepath: str | os.PathLike,
    functions: Functions = None,
    *,
    name: str | None = None,
    **kwargs: Any,
) -> NativeModule:
    """The CUDA twin of :func:`load_cpp_file`: nvcc compiles the ``.cu`` file.

    Takes the keywords of :func:`load_cuda_inline`; the module is named after the
    file unless ``name`` is given, and the file's directory is searched for
    ``#include "..."`` first.

    Example:
        >>> from pathlib import Path
        >>> from polykernel import load_cuda_file
        >>> _ = Path("zero.cu").write_text('''
        ... void zero(pk::Tensor& y, cudaStream_t stream) {
        ...   cudaMemsetAsync(y.data_ptr(), 0, y.nbytes(), stream);
        ... }''')
        >>> mod = load_cuda_file("zero.cu", ["zero"], compute_capability="sm_80")
        >>> mod.name, mod.function_names
        ('zero', ['zero'])
    """
    return _load_file("load_cuda_file", LoweringPlatform.CUDA, filepath, functions,
                      name, kwargs)  # fmt: skip


def load_source(
    func: str,
    platform: LoweringPlatform,
    source: str,
    name: str,
    functions: Functions,
    kwargs: dict[str, Any],
    include_dir: str | os.PathLike,
    path: str | os.PathLike | None = None,
) -> NativeModule:
    """Load ``source`` read from a file or directory, with the inline keywords.

    ``include_dir`` goes first on the include path; ``path`` names the file in
    compiler messages.
    """
    keywords = keywords_for(func, platform, kwargs)
    request = LoadRequest.resolve(
        func, platform, name, source, functions, keywords, path, include_dir
    )
    return load(request)


def _load_file(
    func: str,
    platform: LoweringPlatform,
    filepath: object,
    functions: Functions,
    name: str | None,
    kwargs: dict[str, Any],
) -> NativeModule:
    path, source = _read(func, filepath)
    name = path.stem if name is None else name
    return load_source(func, platform, source, name, functions, kwargs, path.parent,
                       path)  # fmt: skip


def _read(func: str, filepath: object) -> tuple[Path, str]:
    if not isinstance(filepath, str | os.PathLike):
        raise KernelTypeError(
            f"{func}: filepath must be a path (str or os.PathLike), got "
            f"{type(filepath).__name__} {filepath!r}."
        )
    path = Path(filepath)
    return path, read_source(func, path)


def read_source(func: str, path: Path) -> str:
    """The text of source file ``path``.

    Raises:
        KernelSourceNotFoundError: it cannot be read.
        KernelRegistrationError: it is not UTF-8 text (a binary).
    """
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise KernelSourceNotFoundError(
            f"{func}: cannot read source file '{path}': {err.strerror}; check the "
            "path (relative paths start at the current directory)."
        ) from err
    except UnicodeDecodeError as err:
        raise KernelRegistrationError(
            f"{func}: filepath '{path}' is not UTF-8 text (byte "
            f"{err.object[err.start]:#04x} at offset {err.start}); pass a C++/CUDA "
            f"source file, not a binary."
        ) from None
