"""Compile (or fetch from the cache), ``dlopen`` and register one native module.

What the ``load_*`` functions run once their arguments are checked. Target names
and reloading: each build registers its functions under a content-versioned target
``"<name>.<function>.pk<key16>"``, which the module's callables always use. The
documented name ``"<prefix>.<function>"`` (prefix: ``target_prefix`` or the module
name) is also registered, for the *first* build that claims it in the process. XLA
cannot re-point a registered name, so after an edited source is reloaded under the
same name:

* ``mod.function(...)`` and generators that use the returned module run the new code;
* programs that call ``jax.ffi.ffi_call("<name>.<function>", ...)`` by hand, and any
  executable compiled before, keep running the first build (a ``UserWarning`` says
  so once per reload, unless ``replace=True`` says the reload is intended). Use
  ``mod.target("function")`` to get the current name.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._version import __version__
from ..errors import CompilationError, ToolchainError
from ..ffi import abi
from . import cache
from .argspec import resolve_specs
from .codegen import handler_symbol, render_source
from .compiler import (
    CompileOptions,
    build_command,
    classify_failure,
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

__all__ = ["Flags", "load"]

_lock = threading.RLock()
_modules: dict[tuple[str, str], NativeModule] = {}  # (name, key) -> module
_public: dict[tuple[str, str], str] = {}  # (public target, platform) -> key


@dataclass(frozen=True)
class Flags:
    """How one load behaves beyond compiling (none of it is part of the cache key)."""

    vmap_method: str = "sequential"
    allow_cuda_graph: bool = True
    force_rebuild: bool = False
    verbose: bool = False
    replace: bool = False
    auto_register: bool = True
    target_prefix: str | None = None
    build_directory: str | None = None


@functools.cache
def _headers_digest() -> str:
    """Contents of our headers and jaxlib's FFI C API header (their API is our ABI)."""
    pk_inc, jax_inc = include_dirs()
    h = hashlib.sha256()
    root = Path(pk_inc)
    files = sorted(root.rglob("*.h"))
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    c_api = Path(jax_inc) / "xla" / "ffi" / "api" / "c_api.h"
    h.update(c_api.name.encode() + b"\0" + c_api.read_bytes())
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


def load(
    name: str,
    source: str,
    functions,
    platform: str,
    options: CompileOptions,
    flags: Flags,
    path: str | os.PathLike | None = None,
) -> NativeModule:
    """Resolve specs, build or fetch the library, register it; return the module."""
    import jax
    import jaxlib

    abi.layout()  # refuses an FFI API version we do not know, before compiling
    specs = resolve_specs(name, source, functions, platform)
    filename = str(path) if path is not None else None
    full, wrappers = render_source(
        name, source, specs, platform, filename, allow_cuda_graph=flags.allow_cuda_graph
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
        fresh = module is None
        if fresh or flags.force_rebuild:
            lib, built = _fetch_or_build(name, key, full, platform, cmd, options, flags)
        if fresh:
            module = _register(name, key, lib, built, specs, platform, flags)
            _modules[(name, key)] = module
        elif flags.verbose:
            print(f"polykernel.native module '{name}': already loaded ({key[:16]}).")
        if flags.auto_register:
            _publish(module, flags, fresh)
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
    flags: Flags,
) -> tuple[Path, bool]:
    lib = None if flags.force_rebuild else cache.lookup(key)
    if lib is not None:
        if flags.verbose:
            print(f"polykernel.native module '{name}': cache hit {lib}.")
        return lib, False
    with cache.build_lock(key):
        # Another process may have built it meanwhile.
        lib = None if flags.force_rebuild else cache.lookup(key)
        if lib is not None:
            return lib, False
        ext = "cu" if platform == "cuda" else "cpp"
        tmp_root = cache.ensure_dir(cache.native_root() / "tmp")
        if flags.build_directory:  # the caller's: files stay there
            build_dir = Path(flags.build_directory)
            build_dir.mkdir(parents=True, exist_ok=True)
        else:
            build_dir = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_root))
        src, out = build_dir / f"{name}.{ext}", build_dir / f"{name}.so"
        src.write_text(full)
        real_cmd = [
            str(src) if c == "<src>" else str(out) if c == "<out>" else c for c in cmd
        ]
        failed = cache.native_root() / "failed" / f"{name}-{key[:12]}"
        try:
            seconds = run_compiler(
                name, real_cmd, failed / src.name, options.timeout, flags.verbose
            )
        except CompilationError as err:
            if not flags.build_directory:
                cache.ensure_dir(failed.parent)
                keep_failed(build_dir, failed)
            raise classify_failure(err) from None
        meta = {"name": name, "command": real_cmd, "seconds": seconds}
        if flags.build_directory:
            staged = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=tmp_root))
            shutil.copy2(out, staged / "lib.so")
            lib = cache.publish(key, staged / "lib.so", full, ext, meta)
            staged.rmdir()
        else:
            lib = cache.publish(key, out, full, ext, meta)
            for leftover in build_dir.iterdir():
                leftover.unlink()
            build_dir.rmdir()
        return lib, True


def _register(name, key, lib, built, specs, platform, flags: Flags) -> NativeModule:
    import jax

    # Register only after the CPU backend exists: a registration deferred to backend
    # start-up turns any handler problem into "Unable to initialize backend 'cpu'".
    jax.devices("cpu")
    handle = ctypes.CDLL(str(lib))
    xla_platform = "CUDA" if platform == "cuda" else "cpu"
    prefix = flags.target_prefix or name
    functions = []
    for spec in specs:
        handler = getattr(handle, handler_symbol(spec.name))
        capsule = jax.ffi.pycapsule(handler)
        target = f"{name}.{spec.name}.pk{key[:16]}"
        jax.ffi.register_ffi_target(target, capsule, platform=xla_platform)
        address = ctypes.cast(handler, ctypes.c_void_p).value
        public = f"{prefix}.{spec.name}"
        functions.append(
            NativeFunction(name, spec, target, public, flags.vmap_method, address)
        )
    return NativeModule(name, platform, key, str(lib), built, functions, handle)


def _publish(module: NativeModule, flags: Flags, fresh: bool) -> None:
    """Register ``"<prefix>.<function>"`` for every function whose name is free."""
    import jax

    xla_platform = "CUDA" if module.platform == "cuda" else "cpu"
    prefix = flags.target_prefix or module.name
    for fname, fn in module.functions.items():
        public = f"{prefix}.{fname}"
        first = _public.get((public, xla_platform))
        if first is None:
            handler = getattr(module._handle, handler_symbol(fname))
            capsule = jax.ffi.pycapsule(handler)
            jax.ffi.register_ffi_target(public, capsule, platform=xla_platform)
            _public[(public, xla_platform)] = module.key
        elif first != module.key and fresh and not flags.replace:
            warnings.warn(
                f"polykernel.native: '{public}' was reloaded with different code. "
                f"mod.{fname}(...) runs the new build (target '{fn.target}'), but "
                f"raw jax.ffi.ffi_call('{public}') and executables compiled earlier "
                "keep running the first build; XLA cannot re-point a target name. "
                "Pass replace=True to say the reload is intended.",
                UserWarning,
                stacklevel=5,
            )
