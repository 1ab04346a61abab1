"""Compile (or fetch from the cache), ``dlopen`` and register one native module.

What the ``load_*`` functions run once their :class:`~.request.LoadRequest` is
checked: resolve the function specs, render the translation unit, compute the
content key, fetch or build the library through the one native build path
(:func:`polykernel.native.build.fetch_or_build`) and register every handler through
the one target registry (:mod:`polykernel.ffi.targets`).

Target names and reloading: each build registers its functions under a
content-versioned target ``"<name>.<function>.pk<key16>"``, which the module's
callables always use. The documented name ``"<prefix>.<function>"`` (prefix:
``target_prefix`` or the module name) is also registered, for the *first* build that
claims it in the process. XLA cannot re-point a registered name, so after an edited
source is reloaded under the same name:

* ``mod.function(...)`` and generators that use the returned module run the new code;
* programs that call ``jax.ffi.ffi_call("<name>.<function>", ...)`` by hand, and any
  executable compiled before, keep running the first build (a ``UserWarning`` says
  so once per reload, unless ``replace=True`` says the reload is intended). Use
  ``mod.target("function")`` to get the current name.
"""

from __future__ import annotations

import ctypes
import os
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..._version import __version__
from ...errors import ToolchainError
from ...ffi import abi, targets
from ...native import build, cache
from ...native.compiler import CompileOptions, build_command, classify_failure
from ...native.toolchain import (
    cuda_arches,
    find_host_compiler,
    find_nvcc,
    fingerprint,
    has_static_runtime,
)
from ...platforms import LoweringPlatform, xla_platform
from .argspec import resolve_specs
from .codegen import handler_symbol, render_source
from .module import NativeFunction, NativeModule
from .request import LoadRequest

__all__ = ["BACKEND", "load", "loaded_modules"]

#: The backend name its targets are registered under.
BACKEND = "cuda_raw"
_lock = threading.RLock()
_modules: dict[tuple[str, str], NativeModule] = {}  # (name, key) -> module


def _includes_digest(paths: Sequence[str]) -> str:
    """Stat digest of up to 2000 files under the user's extra include paths."""
    import hashlib

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


def _self_contained(platform: str, compiler: str, options: CompileOptions) -> bool:
    """Link the C++ runtime statically when the host compiler has libstdc++.a."""
    store = cache.native_root() / "toolchains"
    if platform == LoweringPlatform.CUDA:
        try:
            compiler = find_host_compiler(options.compiler)
        except ToolchainError:
            return False  # nvcc will report the missing host compiler itself
    return has_static_runtime(compiler, store)


def _job(request: LoadRequest, full: str, wrappers: str) -> build.BuildJob:
    """The build of ``request``: command line and content key."""
    import jax
    import jaxlib

    options = request.options
    store = cache.native_root() / "toolchains"
    if request.platform == LoweringPlatform.CUDA:
        compiler = find_nvcc(options.nvcc)
        arches = cuda_arches(options.cuda_arch)
    else:
        compiler, arches = find_host_compiler(options.compiler), ()
    static = _self_contained(request.platform, compiler, options)
    cmd = build_command(
        request.platform, compiler, options, arches, "<src>", "<out>", static
    )
    key = cache.compute_key(
        {
            "platform": request.platform.value,
            "source": full,
            "wrapper": wrappers,
            "flags": "\0".join(cmd[1:]),
            "compiler": fingerprint(compiler, store),
            "arch": ",".join(arches),
            "jax": f"jax {jax.__version__} jaxlib {jaxlib.__version__}",
            "headers": build.headers_digest(),
            "includes": _includes_digest(options.include_paths),
            "polykernel": __version__,
        }
    )
    ext = "cu" if request.platform == LoweringPlatform.CUDA else "cpp"
    return build.BuildJob(
        name=request.name,
        key=key,
        source=full,
        ext=ext,
        command=tuple(cmd),
        timeout=options.timeout,
        meta={"platform": request.platform.value},
        verbose=request.keywords.verbose,
        force=request.keywords.force_rebuild,
        build_directory=request.build_directory,
    )


def load(request: LoadRequest) -> NativeModule:
    """Resolve specs, build or fetch the library, register it; return the module."""
    abi.layout()  # refuses an FFI API version we do not know, before compiling
    specs = resolve_specs(
        request.name, request.source, request.functions, request.platform
    )
    full, wrappers = render_source(
        request.name,
        request.source,
        specs,
        request.platform,
        request.path,
        allow_cuda_graph=request.keywords.allow_cuda_graph,
    )
    job = _job(request, full, wrappers)
    with _lock:
        module = _modules.get((request.name, job.key))
        fresh = module is None
        if fresh or request.keywords.force_rebuild:
            fetched = build.fetch_or_build(job, _dlopen, classify_failure)
        if fresh:
            module = _register(request, job.key, fetched, specs)
            _modules[(request.name, job.key)] = module
        elif request.keywords.verbose:
            print(
                f"polykernel.native module '{request.name}': already loaded "
                f"({job.key[:16]})."
            )
        if request.keywords.auto_register:
            _publish(module, request, fresh)
        return module


def identity(key: str, function: str) -> str:
    """The registry identity of ``function`` of the build with cache key ``key``."""
    return f"cuda_raw:{key}:{function}"


def _dlopen(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path))


def _register(
    request: LoadRequest, key: str, fetched: build.Fetched, specs: Sequence[Any]
) -> NativeModule:
    handle = fetched.handle
    platform = xla_platform(request.platform)
    functions = []
    for spec in specs:
        handler = getattr(handle, handler_symbol(spec.name))
        address = ctypes.cast(handler, ctypes.c_void_p).value or 0
        target = f"{request.name}.{spec.name}.pk{key[:16]}"
        targets.register(
            target,
            address,
            platform=platform,
            identity=identity(key, spec.name),
            backend=BACKEND,
            label=f"{request.name}.{spec.name}",
            owner=handle,
        )
        public = f"{request.prefix}.{spec.name}"
        function = NativeFunction(
            request.name, spec, target, public, request.keywords.vmap_method, address,
            request.platform,
        )  # fmt: skip
        functions.append(function)
    return NativeModule(
        request.name, request.platform, key, str(fetched.path), fetched.built,
        functions, handle,
    )  # fmt: skip


def _publish(module: NativeModule, request: LoadRequest, fresh: bool) -> None:
    """Register ``"<prefix>.<function>"`` for every function whose name is free."""
    platform = xla_platform(module.platform)
    for fname, fn in module.functions.items():
        public = f"{request.prefix}.{fname}"
        first = targets.lookup(public, platform)
        if first is None:
            targets.register(
                public,
                fn.handler_address,
                platform=platform,
                identity=identity(module.key, fname),
                backend=BACKEND,
                label=f"{module.name}.{fname}",
                owner=module,
                portable=False,
                note="a documented name belongs to the first build loaded in a "
                "process; export programs that call the module's functions",
            )
        elif first.identity != identity(module.key, fname) and fresh:
            if request.keywords.replace:
                continue
            warnings.warn(
                f"polykernel.native: '{public}' was reloaded with different code. "
                f"mod.{fname}(...) runs the new build (target '{fn.target}'), but "
                f"raw jax.ffi.ffi_call('{public}') and executables compiled earlier "
                "keep running the first build; XLA cannot re-point a target name. "
                "Pass replace=True to say the reload is intended.",
                UserWarning,
                stacklevel=4,
            )


def loaded_modules() -> list[NativeModule]:
    """Every module ``load_*`` registered in this process."""
    with _lock:
        return list(_modules.values())
