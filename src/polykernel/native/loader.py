"""``load_cpp_inline`` / ``load_cpp_file`` / ``load_cuda_inline`` / ``load_cuda_file``.

Compile (or fetch from the cache), ``dlopen`` and register every function as an XLA
FFI target, then return a callable :class:`NativeModule`.

The signatures are the reference API's (same positional order, same keywords and
defaults), plus polykernel's ``options=CompileOptions(...)`` and ``vmap_method``.
Every argument is checked here, before any work, so a wrong type is a
``TypeError`` and a wrong value a ``ValueError`` naming the argument (both also
polykernel errors). Target naming and reloading: see :mod:`.pipeline`.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import KernelSourceNotFoundError, KernelTypeError
from .argspec import check_module_name
from .compiler import CompileOptions
from .keywords import CPP_KEYWORDS, CUDA_KEYWORDS, check_common, merge_options
from .module import NativeModule
from .pipeline import Flags, load

__all__ = ["load_cpp_file", "load_cpp_inline", "load_cuda_file", "load_cuda_inline"]

Functions = Mapping[str, Sequence[str]] | Iterable[str] | str | None


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
    vmap_method: str = "sequential",
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
        replace: a reload with different code under this name is intended: no
            warning (the raw target name still runs the first build, see
            :mod:`polykernel.native.pipeline`).
        auto_register: register ``"<target_prefix>.<function>"`` for raw
            ``jax.ffi.ffi_call``; the module's own callables work either way.
        target_prefix: prefix of those names (default ``name``).
        options: polykernel's compiler options; a setting given both here and by a
            keyword above is a ``TypeError``.
        vmap_method: how ``jax.vmap`` calls the kernel (default one call per item).

    Returns:
        The module; ``mod.f(x, outs=..., alpha=1.0)`` calls ``f``.

    Example:
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
    return _load_request("load_cpp_inline", "cpu", dict(locals()))


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
    vmap_method: str = "sequential",
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
        >>> mod = load_cuda_inline("k", CUDA_SRC, ["scale"],
        ...                        compute_capability="sm_80")  # doctest: +SKIP
    """
    return _load_request("load_cuda_inline", "cuda", dict(locals()))


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
        >>> mod = load_cpp_file("kernels/add.cpp", ["add"])  # doctest: +SKIP
    """
    path, source = _read("load_cpp_file", filepath)
    name = path.stem if name is None else name
    return load_source(
        "load_cpp_file", "cpu", source, name, functions, kwargs, path.parent, path
    )


def load_cuda_file(
    filepath: str | os.PathLike,
    functions: Functions = None,
    *,
    name: str | None = None,
    **kwargs: Any,
) -> NativeModule:
    """Like :func:`load_cuda_inline` for a ``.cu`` file; its directory is on ``-I``.

    ``name`` defaults to the file's stem; ``kwargs`` are those of
    :func:`load_cuda_inline`.

    Example:
        >>> mod = load_cuda_file("kernels/add.cu", ["add"])  # doctest: +SKIP
    """
    path, source = _read("load_cuda_file", filepath)
    name = path.stem if name is None else name
    return load_source(
        "load_cuda_file", "cuda", source, name, functions, kwargs, path.parent, path
    )


def load_source(
    func: str,
    platform: str,
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
    inline = load_cuda_inline if platform == "cuda" else load_cpp_inline
    params = inspect.signature(inline).parameters
    allowed = {k: p.default for k, p in params.items() if p.kind is p.KEYWORD_ONLY}
    for key in kwargs:
        if key not in allowed:
            raise KernelTypeError(
                f"{func}() got an unexpected keyword argument {key!r}; it accepts "
                f"name= and the keywords of {inline.__name__}: {', '.join(allowed)}."
            )
    sources_key = "cuda_sources" if platform == "cuda" else "cpp_sources"
    given = {**allowed, **kwargs, sources_key: source}
    given.update(name=name, functions=functions)
    return _load_request(func, platform, given, path, include_dir)


def _read(func: str, filepath: object) -> tuple[Path, str]:
    if not isinstance(filepath, str | os.PathLike):
        raise KernelTypeError(
            f"{func}: filepath must be a path (str or os.PathLike), got "
            f"{type(filepath).__name__} {filepath!r}."
        )
    path = Path(filepath)
    try:
        return path, path.read_text(encoding="utf-8")
    except OSError as err:
        raise KernelSourceNotFoundError(
            f"{func}: cannot read source file '{path}': {err.strerror}; check the "
            "path (relative paths start at the current directory)."
        ) from err


def _load_request(
    func: str,
    platform: str,
    given: dict[str, Any],
    path: str | os.PathLike | None = None,
    include_dir: str | os.PathLike | None = None,
) -> NativeModule:
    """Check every argument, fold the keywords into options, then load."""
    check_module_name(given["name"])
    sources_key = "cuda_sources" if platform == "cuda" else "cpp_sources"
    source = _join(func, sources_key, given[sources_key])
    check_common(func, given)
    keywords = CUDA_KEYWORDS if platform == "cuda" else CPP_KEYWORDS
    options = merge_options(func, given["options"], keywords, given)
    if include_dir is not None:  # the sources' own directory first
        includes = (str(Path(include_dir).resolve()), *options.include_paths)
        options = dataclasses.replace(options, include_paths=includes)
    build_dir = given["build_directory"]
    flags = Flags(
        vmap_method=given["vmap_method"],
        allow_cuda_graph=given.get("allow_cuda_graph", True),
        force_rebuild=given["force_rebuild"],
        verbose=given["verbose"],
        replace=given["replace"],
        auto_register=given["auto_register"],
        target_prefix=given["target_prefix"],
        build_directory=None if build_dir is None else os.fspath(build_dir),
    )
    name, functions = given["name"], given["functions"]
    return load(name, source, functions, platform, options, flags, path)


def _join(func: str, argument: str, sources: object) -> str:
    if isinstance(sources, str):
        return sources
    if isinstance(sources, list | tuple) and all(isinstance(s, str) for s in sources):
        return "\n".join(sources)
    raise KernelTypeError(
        f"{func}: {argument} must be the source text (a str) or a list of str, got "
        f"{type(sources).__name__} {sources!r:.60}."
    )
