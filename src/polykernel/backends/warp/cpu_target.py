"""The CPU FFI target of a (Warp kernel, signature): named first, built on a miss.

The target name is derived from content only (:mod:`.names`), so a program
compiled in one process (JAX's persistent cache, ``jax.export``) finds the same
name in the next. Naming needs no build: Warp hashes a module from its kernels'
source and options (well under a millisecond, no native library, no runtime), as
its own loader does before it looks in its cache. With the name, a process loads
the kernel's linked handler from polykernel's cache (:mod:`.linked`): no Warp
build or runtime, no llvmlite, no process started.

On a miss, Warp builds the module for its CPU device; the handler is linked with
Warp's object into one shared object, cached and loaded (:func:`.linked.build`).
Where no C compiler can link, the handler is JIT-compiled with llvmlite around
Warp's loaded module instead (:func:`.cpu_handler.build_cpu_handler`). Either
way a copy of Warp's object is kept (:mod:`.cache`): :mod:`.revive` builds the
handler again from it in a process under another jaxlib.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ...errors import (
    CompilationError,
    HostCompilerNotFoundError,
    KernelCompilationError,
)
from ...ffi import targets
from ...ffi.handler_ir.signature import Signature
from .names import target_for
from .types import import_warp, init_warp

__all__ = ["cpu_target", "kernel_names", "launch_rank", "load_cpu"]

log = logging.getLogger(__name__)
# Warp builds a module for its CPU device with one thread per block.
_CPU_BLOCK_DIM = 1


def load_cpu(kernel: Any) -> tuple[Any, int, str]:
    """Compile/load ``kernel`` on Warp's CPU device.

    Returns:
        ``(module executable, address of <name>_cpu_forward, module hash hex)``.

    Raises:
        KernelCompilationError: Warp has no CPU support or failed to build.
    """
    import ctypes

    wp = init_warp()
    if not wp.is_cpu_available():
        raise KernelCompilationError(
            f"warp_kernel '{kernel.key}': this Warp build has no CPU support "
            f"(wp.is_cpu_available() is False); install a warp-lang wheel built "
            f"with its LLVM/Clang CPU backend."
        )
    try:
        module_exec = kernel.module.load(wp.get_device("cpu"), _CPU_BLOCK_DIM)
        hooks = module_exec.get_kernel_hooks(kernel) if module_exec else None
    except Exception as err:
        raise KernelCompilationError(
            f"warp_kernel '{kernel.key}': Warp failed to compile the kernel for its "
            f"CPU device: {type(err).__name__}: {err}"
        ) from err
    if hooks is None or hooks.forward is None:
        raise KernelCompilationError(
            f"warp_kernel '{kernel.key}': Warp built the module but exposes no CPU "
            f"entry point for the kernel (a previous build failure is cached; clear "
            f"Warp's kernel cache with wp.clear_kernel_cache())."
        )
    address = ctypes.cast(hooks.forward, ctypes.c_void_p).value or 0
    return module_exec, address, _hex(module_exec.module_hash)


def _hex(digest: Any) -> str:
    return digest.hex() if isinstance(digest, bytes) else str(digest)


def kernel_names(kernel: Any) -> tuple[str, str] | None:
    """``(module hash hex, mangled name)`` of ``kernel``'s CPU build, as Warp's
    loader computes them, without building; None where this Warp does not expose
    them (the name then comes from a build)."""
    try:
        module = kernel.module
        digest = module.get_module_hash(_CPU_BLOCK_DIM)
        kernel_hash = module.hashers[_CPU_BLOCK_DIM].kernel_hashes[kernel]
        return _hex(digest), str(kernel.get_mangled_name(kernel_hash=kernel_hash))
    except Exception as err:  # Warp's internals differ: name it from a build
        log.debug("warp: cannot name %r without a build: %r", kernel, err)
        return None


def launch_rank(kernel: Any) -> int:
    """The rank of ``wp.tid()`` (Warp's ``launch_bounds_t<N>``), set by its build."""
    rank = getattr(kernel.adj, "kernel_dim", None)
    if rank is None:
        raise KernelCompilationError(
            f"warp_kernel '{kernel.key}': Warp did not report the kernel's launch "
            f"rank after building it (warp-lang {import_warp().__version__}); "
            f"polykernel needs warp-lang 1.19 or newer."
        )
    return int(rank)


def cpu_target(owner: Any, sig: Signature, shapes: Any) -> tuple[str, dict]:
    """Register the handler for ``sig`` (from the cache, else built) and return
    ``(target name, {})``."""
    from . import linked

    del shapes  # the handler reads them from the call frame
    launch = owner.launch_dims if owner.launch_dims is not None else 0
    version = str(import_warp().__version__)
    names = kernel_names(owner.kernel)
    if names is not None:
        target = target_for(*names, sig, launch, version)
        if linked.load(target):
            return target, {}
    return _build(owner, sig, launch, names, version), {}


def _build(owner: Any, sig: Signature, launch: Any, names: Any, version: str) -> str:
    from .cache import object_bytes, save
    from .cpu_handler import build_cpu_handler

    module_exec, address, digest = load_cpu(owner.kernel)
    plan = dataclasses.replace(owner.plan, launch_ndim=launch_rank(owner.kernel))
    name = module_exec.get_kernel_mangled_name(owner.kernel)
    entry = f"{name}_cpu_forward"
    if names is not None and names != (digest, name):
        # Options Warp resolves only once its runtime started (a sanitizer of its
        # compiler) entered the hash. The name stays the one a process computes
        # without starting Warp, so later ones find this build; the symbol is
        # the build's.
        log.debug("warp: %s was named %s before its build, %s after",
                  owner.name, names, (digest, name))  # fmt: skip
        digest, name = names
    target = target_for(digest, name, sig, launch, version)
    if targets.lookup(target, "cpu") is not None:
        return target
    parts = {
        "digest": digest,
        "name": name,
        "launch": launch,
        "plan": plan,
        "sig": sig,
        "label": owner.name,
        "entry": entry,
        "warp": version,
    }
    data = object_bytes(module_exec)
    # A process under another jaxlib links the handler again from this copy.
    portable = save(target, parts, data)
    if data and _linked(target, parts, data):
        return target
    build_cpu_handler(target, sig, owner.name, plan, address, launch, module_exec,
                      portable)  # fmt: skip
    return target


def _linked(target: str, parts: dict[str, Any], data: bytes) -> bool:
    """Build and register the linked handler; False: take the JIT path."""
    from . import linked

    try:
        if linked.build(target, parts, data):
            return True
    except HostCompilerNotFoundError as err:
        log.debug("warp: no C compiler to link %s (%s); its handler is JIT-"
                  "compiled with llvmlite in this process", target, err)  # fmt: skip
    except CompilationError as err:
        log.warning("warp: linking the handler of %s failed; it is JIT-compiled "
                    "in this process instead: %s", target, err)  # fmt: skip
    return False
