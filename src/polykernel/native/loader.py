"""``load_cpp_inline`` / ``load_cpp_file`` / ``load_cuda_inline`` / ``load_cuda_file``.

Compile (or fetch from the cache), ``dlopen`` and register every function as an XLA
FFI target, then return a callable :class:`NativeModule`.

Target names and reloading. Each build registers its functions under a
content-versioned target ``"<name>.<function>.pk<key16>"``; the module's callables
always use it. The documented name ``"<name>.<function>"`` is also registered, for
the *first* build of that name in the process. XLA cannot re-point a registered name,
so after an edited source is reloaded under the same name:

* ``mod.function(...)`` and generators that use the returned module run the new code;
* programs that call ``jax.ffi.ffi_call("<name>.<function>", ...)`` by hand, and any
  executable compiled before, keep running the first build (a ``UserWarning`` says
  so once per reload). Use ``mod.target("function")`` to get the current name.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import tempfile
import threading
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from .._version import __version__
from ..errors import ToolchainError
from ..ffi import abi
from . import cache
from .argspec import check_module_name, resolve_specs
from .codegen import handler_symbol, render_source
from .compiler import (
    CompileOptions,
    build_command,
    include_dirs,
    keep_failed,
    run_compiler,
)
from .module import NativeFunction, NativeModule
from .toolchain import (
    cuda_arches,
    find_host_compiler,
    find_nvcc,
    fingerprint,
    has_static_runtime,
)

__all__ = ["load_cpp_file", "load_cpp_inline", "load_cuda_file", "load_cuda_inline"]

Functions = Mapping[str, Sequence[str]] | Iterable[str] | str
_lock = threading.RLock()
_modules: dict[tuple[str, str], NativeModule] = {}  # (name, key) -> module
_public: dict[tuple[str, str], str] = {}  # (public target, platform) -> key


def load_cpp_inline(
    name: str,
    cpp_sources: str | Sequence[str],
    functions: Functions,
    *,
    options: CompileOptions | None = None,
    vmap_method: str = "sequential",
) -> NativeModule:
    """Compile C++ source for the CPU and register its functions with XLA.

    Args:
        name: module name; functions become FFI targets ``"<name>.<function>"``.
        cpp_sources: C++ source text (or several, joined).
        functions: ``{"f": ["arg", "ret", "attr.alpha:float32"]}``, or names whose
            spec is inferred from the ``void f(...)`` signature.
        options: compiler options (default ``-O3``).
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
    return _load(name, _join(cpp_sources), functions, "cpu", options, vmap_method)


def load_cuda_inline(
    name: str,
    cuda_sources: str | Sequence[str],
    functions: Functions,
    *,
    options: CompileOptions | None = None,
    vmap_method: str = "sequential",
    allow_cuda_graph: bool = True,
) -> NativeModule:
    """Compile CUDA source with nvcc and register its functions for the GPU.

    Same arguments as :func:`load_cpp_inline`; a ``cudaStream_t`` parameter (token
    ``stream``) receives XLA's stream. The target architecture comes from
    ``options.cuda_arch``, ``$POLYKERNEL_CUDA_ARCH`` or the visible GPU.

    Handlers are registered command-buffer compatible, so XLA may capture chains and
    loops of calls in one CUDA graph; pass ``allow_cuda_graph=False`` for a kernel
    with host-side effects (host synchronisation, allocation, data-dependent
    launches) that must run on every call.

    Example:
        >>> mod = load_cuda_inline("k", CUDA_SRC, ["scale"],
        ...                        options=CompileOptions(cuda_arch=["sm_80"]))
        ...                                                 # doctest: +SKIP
    """
    return _load(
        name,
        _join(cuda_sources),
        functions,
        "cuda",
        options,
        vmap_method,
        allow_cuda_graph=allow_cuda_graph,
    )


def load_cpp_file(
    path: str | os.PathLike,
    functions: Functions,
    *,
    name: str | None = None,
    options: CompileOptions | None = None,
    vmap_method: str = "sequential",
) -> NativeModule:
    """Like :func:`load_cpp_inline` for a source file; its directory is on ``-I``.

    Example:
        >>> mod = load_cpp_file("kernels/add.cpp", ["add"])  # doctest: +SKIP
    """
    name, source, options = _read_file(path, name, options)
    return _load(name, source, functions, "cpu", options, vmap_method, path)


def load_cuda_file(
    path: str | os.PathLike,
    functions: Functions,
    *,
    name: str | None = None,
    options: CompileOptions | None = None,
    vmap_method: str = "sequential",
    allow_cuda_graph: bool = True,
) -> NativeModule:
    """Like :func:`load_cuda_inline` for a ``.cu`` file; its directory is on ``-I``.

    Example:
        >>> mod = load_cuda_file("kernels/add.cu", ["add"])  # doctest: +SKIP
    """
    name, source, options = _read_file(path, name, options)
    return _load(
        name,
        source,
        functions,
        "cuda",
        options,
        vmap_method,
        path,
        allow_cuda_graph=allow_cuda_graph,
    )


def _join(sources: str | Sequence[str]) -> str:
    return sources if isinstance(sources, str) else "\n".join(sources)


def _read_file(
    path: str | os.PathLike, name: str | None, options: CompileOptions | None
) -> tuple[str, str, CompileOptions]:
    path = Path(path)
    try:
        source = path.read_text()
    except OSError as err:
        raise FileNotFoundError(
            f"polykernel.native: cannot read source file '{path}': {err.strerror}."
        ) from err
    options = options or CompileOptions()
    includes = (str(path.resolve().parent), *options.include_paths)
    options = CompileOptions(**{**options.__dict__, "include_paths": includes})
    return name or path.stem, source, options


@functools.cache
def _headers_digest() -> str:
    """Contents of our headers and jaxlib's FFI C API header (their API is our ABI)."""
    pk_inc, jax_inc = include_dirs()
    h = hashlib.sha256()
    files = sorted(Path(pk_inc).glob("*.h"))
    files.append(Path(jax_inc) / "xla" / "ffi" / "api" / "c_api.h")
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _includes_digest(paths: Sequence[str]) -> str:
    """Stat digest of up to 2000 files under the user's extra include paths."""
    h = hashlib.sha256()
    for root in paths:
        count = 0
        for dirpath, _dirs, files in os.walk(root):
            for f in sorted(files):
                full = os.path.join(dirpath, f)
                st = os.stat(full)
                h.update(f"{full}|{st.st_mtime_ns}|{st.st_size}\n".encode())
                count += 1
            if count > 2000:
                break
    return h.hexdigest()


def _load(
    name: str,
    source: str,
    functions: Functions,
    platform: str,
    options: CompileOptions | None,
    vmap_method: str,
    path: str | os.PathLike | None = None,
    allow_cuda_graph: bool = True,
) -> NativeModule:
    import jax
    import jaxlib

    check_module_name(name)
    abi.layout()  # refuses an FFI API version we do not know, before compiling
    options = options or CompileOptions()
    specs = resolve_specs(name, source, functions, platform)
    filename = str(path) if path is not None else None
    full, wrappers = render_source(
        name, source, specs, platform, filename, allow_cuda_graph=allow_cuda_graph
    )
    store = cache.native_root() / "toolchains"
    if platform == "cuda":
        compiler = find_nvcc(options.nvcc)
        arches = cuda_arches(options.cuda_arch)
    else:
        compiler, arches = find_host_compiler(options.compiler), ()
    static = _self_contained(platform, compiler, options, store)
    cmd = build_command(platform, compiler, options, arches, "<src>", "<out>", static)
    parts = {
        "platform": platform,
        "source": full,
        "wrapper": wrappers,
        "flags": "\0".join(cmd[1:]),
        "compiler": fingerprint(compiler, store),
        "arch": ",".join(arches),
        "jax": f"jax {jax.__version__} jaxlib {jaxlib.__version__}",
        "headers": _headers_digest(),
        "includes": _includes_digest(options.include_paths),
        "polykernel": __version__,
    }
    key = cache.compute_key(parts)
    with _lock:
        module = _modules.get((name, key))
        if module is not None:
            return module  # identical reload: nothing to do
        lib, built = _fetch_or_build(name, key, full, platform, cmd, options)
        module = _register(name, key, lib, built, specs, platform, vmap_method)
        _modules[(name, key)] = module
        return module


def _self_contained(
    platform: str, compiler: str, options: CompileOptions, store: Path
) -> bool:
    """Link the C++ runtime statically when the host compiler has libstdc++.a."""
    if platform == "cuda":
        try:
            compiler = find_host_compiler(options.compiler)
        except ToolchainError:
            return False  # nvcc will report the missing host compiler itself
    return has_static_runtime(compiler, store)


def _fetch_or_build(
    name: str,
    key: str,
    full: str,
    platform: str,
    cmd: list[str],
    options: CompileOptions,
) -> tuple[Path, bool]:
    lib = cache.lookup(key)
    if lib is not None:
        return lib, False
    with cache.build_lock(key):
        lib = cache.lookup(key)  # another process may have built it meanwhile
        if lib is not None:
            return lib, False
        ext = "cu" if platform == "cuda" else "cpp"
        tmp_root = cache.ensure_dir(cache.native_root() / "tmp")
        build_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_root))
        src, out = build_dir / f"{name}.{ext}", build_dir / "lib.so"
        src.write_text(full)
        real_cmd = [
            str(src) if c == "<src>" else str(out) if c == "<out>" else c for c in cmd
        ]
        failed = cache.native_root() / "failed" / f"{name}-{key[:12]}"
        try:
            seconds = run_compiler(name, real_cmd, failed / src.name, options.timeout)
        except Exception:
            cache.ensure_dir(failed.parent)
            keep_failed(build_dir, failed)
            raise
        lib = cache.publish(
            key, out, full, ext, {"name": name, "command": real_cmd, "seconds": seconds}
        )
        for leftover in build_dir.iterdir():
            leftover.unlink()
        build_dir.rmdir()
        return lib, True


def _register(name, key, lib, built, specs, platform, vmap_method) -> NativeModule:
    import jax

    # Register only after the CPU backend exists: a registration deferred to backend
    # start-up turns any handler problem into "Unable to initialize backend 'cpu'".
    jax.devices("cpu")
    handle = ctypes.CDLL(str(lib))
    xla_platform = "CUDA" if platform == "cuda" else "cpu"
    functions = []
    for spec in specs:
        handler = getattr(handle, handler_symbol(spec.name))
        capsule = jax.ffi.pycapsule(handler)
        target = f"{name}.{spec.name}.pk{key[:16]}"
        public = f"{name}.{spec.name}"
        jax.ffi.register_ffi_target(target, capsule, platform=xla_platform)
        first = _public.setdefault((public, xla_platform), key)
        if first == key:
            jax.ffi.register_ffi_target(public, capsule, platform=xla_platform)
        else:
            warnings.warn(
                f"polykernel.native: '{public}' was reloaded with different code. "
                f"mod.{spec.name}(...) runs the new build (target '{target}'), but "
                f"raw jax.ffi.ffi_call('{public}') and executables compiled earlier "
                "keep running the first build; XLA cannot re-point a target name.",
                UserWarning,
                stacklevel=4,
            )
        address = ctypes.cast(handler, ctypes.c_void_p).value
        functions.append(
            NativeFunction(name, spec, target, public, vmap_method, address)
        )
    return NativeModule(name, platform, key, str(lib), built, functions, handle)
