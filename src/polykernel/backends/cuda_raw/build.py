"""Compile (or fetch from the cache), ``dlopen`` and register one native module.

What the ``load_*`` functions run once their :class:`~.request.LoadRequest` is
checked: resolve the function specs, render the translation unit, compute the
content key, fetch or build the library through the one native build path
(:func:`polykernel.native.build.fetch_or_build`) and register every handler through
the one target registry (:mod:`polykernel.ffi.targets`).

Target names and reloading: each build registers its functions under a
content-versioned target ``"<name>.<function>.pk<key16>"``, which the module's
callables always use. The documented name ``"<prefix>.<function>"`` (prefix:
``target_prefix`` or the module name) is registered once per process, with a
*forwarding* handler compiled into the first build that claims it (see
:func:`~.codegen.forwarder_symbols`). XLA cannot re-point a registered name, but the
forwarder can: every later load of the name (an edited source, or an earlier build
loaded again) points it at that build's handler. So a raw
``jax.ffi.ffi_call("<prefix>.<function>", ...)``, and an executable compiled before
the reload that calls it, always run the build loaded last; ``mod.function(...)`` and
``mod.target("function")`` stay bound to their own build. A documented name some
other backend registered is refused (:class:`KernelRegistrationError`) rather than
left running another kernel.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..._version import __version__
from ...errors import KernelRegistrationError, ToolchainError
from ...ffi import abi, targets
from ...ffi.artefact import Artefact, Requirements, machine
from ...native import build, cache
from ...native.compiler import (
    CompileOptions,
    build_command,
    classify_failure,
    ptx_arch,
)
from ...native.toolchain import (
    cuda_arches,
    find_host_compiler,
    find_nvcc,
    fingerprint,
    has_static_runtime,
    is_gcc,
)
from ...platforms import LoweringPlatform, xla_platform
from .argspec import resolve_specs
from .codegen import forwarder_symbols, handler_symbol, render_source
from .kernel import NativeFunction, NativeModule
from .request import LoadRequest

__all__ = ["BACKEND", "load", "loaded_modules"]

#: The backend name its targets are registered under.
BACKEND = "cuda_raw"
_lock = threading.RLock()
_modules: dict[tuple[str, str], NativeModule] = {}  # (name, key) -> module
_loading: dict[tuple[str, str], threading.RLock] = {}  # (name, key) -> its loads
#: (documented name, XLA platform) -> [setter of its forwarder, identity it runs].
_forwarders: dict[tuple[str, str], list[Any]] = {}


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


def _arches(request: LoadRequest) -> tuple[str, ...]:
    """The GPU architectures a CUDA module is built for (none for C++): asked once
    per load, for the build's key and the artefact's requirements alike."""
    if request.platform == LoweringPlatform.CUDA:
        return cuda_arches(request.options.cuda_arch)
    return ()


def _job(
    request: LoadRequest, full: str, wrappers: str, arches: tuple[str, ...]
) -> build.BuildJob:
    """The build of ``request``: command line and content key."""
    import jax
    import jaxlib.version

    options = request.options
    store = cache.native_root() / "toolchains"
    if request.platform == LoweringPlatform.CUDA:
        compiler = find_nvcc(options.nvcc)
    else:
        compiler = find_host_compiler(options.compiler)
    static = _self_contained(request.platform, compiler, options)
    cmd = build_command(
        request.platform, compiler, options, arches, "<src>", "<out>", static
    )
    parts = {
        "platform": request.platform.value,
        "source": full,
        "wrapper": wrappers,
        "flags": "\0".join(cmd[1:]),
        "compiler": fingerprint(compiler, store),
        "arch": ",".join(arches),
        "jax": f"jax {jax.__version__} jaxlib {jaxlib.version.__version__}",
        "headers": build.headers_digest(),
        "includes": _includes_digest(options.include_paths),
        "polykernel": __version__,
    }
    key = cache.compute_key(parts)
    pch_parts = None
    if request.platform == LoweringPlatform.CPU and is_gcc(compiler, store):
        # Everything but the module's own code decides the precompiled header.
        pch_parts = {k: v for k, v in parts.items() if k not in ("source", "wrapper")}
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
        pch_parts=pch_parts,
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
    arches = _arches(request)
    job = _job(request, full, wrappers, arches)
    slot = (request.name, job.key)
    # One thread at a time per module; other modules build meanwhile (``cache
    # warm``), outside the lock of the tables below.
    with _module_lock(slot):
        with _lock:
            module = _modules.get(slot)
        fresh = module is None
        if fresh or request.keywords.force_rebuild:
            fetched = build.fetch_or_build(job, _dlopen, classify_failure)
        with _lock:
            if fresh:
                module = _register(request, job.key, fetched, specs, arches)
                _modules[slot] = module
            elif request.keywords.verbose:
                print(
                    f"polykernel.native module '{request.name}': already loaded "
                    f"({job.key[:16]})."
                )
            if request.keywords.auto_register:
                _publish(module, request, fresh)
            return module


def _module_lock(slot: tuple[str, str]) -> threading.RLock:
    """The lock of the loads of one module (name, key) in this process."""
    with _lock:
        return _loading.setdefault(slot, threading.RLock())


def identity(key: str, function: str) -> str:
    """The registry identity of ``function`` of the build with cache key ``key``."""
    return f"cuda_raw:{key}:{function}"


def _dlopen(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path))


def _register(
    request: LoadRequest,
    key: str,
    fetched: build.Fetched,
    specs: Sequence[Any],
    arches: tuple[str, ...],
) -> NativeModule:
    handle = fetched.handle
    platform = xla_platform(request.platform)
    assert platform is not None  # C++ or CUDA: XLA files both
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
            artefact=_artefact(target, handler_symbol(spec.name), fetched, arches),
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


def _artefact(
    target: str, symbol: str, fetched: build.Fetched, arches: tuple[str, ...]
) -> Artefact:
    """The library as a bundle carries it: compiled for the architecture (no
    ``-march=native``), with no runtime beyond the C++ one it links (a CUDA
    module links the CUDA runtime statically and finds the driver when it first
    launches); its checksum is taken when it is carried (the cache verified the
    file when it was loaded). A CUDA module records the GPU architectures it holds
    cubins for (``arches``) and the newest one's PTX (:func:`~polykernel.native.
    compiler.build_command`), which a GPU loading it must fit."""
    ptx = (ptx_arch(arches),) if arches else ()
    requires = Requirements(machine(), gpu=arches, ptx=ptx)
    return Artefact(target, BACKEND, str(fetched.path), symbol, "", requires,
                    label=target)  # fmt: skip


def _publish(module: NativeModule, request: LoadRequest, fresh: bool) -> None:
    """Point ``"<prefix>.<function>"`` at this build, for every function.

    The first load of a name registers the forwarder of its build; every load
    re-points it (``fresh`` is unused: loading an earlier build again makes it the
    latest too).

    Raises:
        KernelRegistrationError: the name belongs to a target another backend (or
            a user, by hand) registered.
    """
    del fresh
    platform = xla_platform(module.platform)
    assert platform is not None  # C++ or CUDA: XLA files both
    for fname, fn in module.functions.items():
        public = f"{request.prefix}.{fname}"
        public_symbol, setter_symbol = forwarder_symbols(fname)
        forwarder = _forwarders.get((public, platform))
        if forwarder is None:
            _claim(module, fname, public, platform, public_symbol, setter_symbol)
        else:
            forwarder[0](fn.handler_address)
            forwarder[1] = identity(module.key, fname)


def forwarded_identity(name: str, platform: str) -> str | None:
    """The identity of the build documented name ``name`` runs now (None: ``name``
    is not a documented name of a loaded module)."""
    xla = xla_platform(platform)
    with _lock:
        forwarder = None if xla is None else _forwarders.get((name, xla))
        return None if forwarder is None else forwarder[1]


def _claim(module, fname, public, platform, public_symbol, setter_symbol) -> None:
    """Register ``public`` with this build's forwarder (first load of the name)."""
    owner = targets.lookup(public, platform)
    if owner is not None:
        raise KernelRegistrationError(
            f"polykernel.native: module '{module.name}' cannot publish '{public}': "
            f"that FFI target is already registered by {owner.backend} "
            f"({owner.label}), so a raw jax.ffi.ffi_call('{public}') would not run "
            f"this module. Pass target_prefix='...' for another name, or "
            f"auto_register=False and call mod.{fname}(...) (its own target is "
            f"mod.target('{fname}'))."
        )
    forwarder = module.library_symbol(public_symbol)
    address = ctypes.cast(forwarder, ctypes.c_void_p).value or 0
    setter = module.library_symbol(setter_symbol)
    setter.argtypes, setter.restype = [ctypes.c_void_p], None
    targets.register(
        public,
        address,
        platform=platform,
        identity=f"cuda_raw:forwarder:{module.key}:{fname}",
        backend=BACKEND,
        label=f"{module.name}.{fname} (the latest build loaded)",
        owner=module,
        portable=False,
        note="a documented name runs the build loaded last in a process; export "
        "programs that call the module's functions",
    )
    _forwarders[(public, platform)] = [setter, identity(module.key, fname)]


def loaded_modules() -> list[NativeModule]:
    """Every module ``load_*`` registered in this process."""
    with _lock:
        return list(_modules.values())
