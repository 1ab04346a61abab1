"""The CPU FFI target of a (Warp kernel, signature): load Warp's CPU build, wrap it.

The target name is derived from content only (Warp's module hash, the kernel's
mangled name, the signature and the launch grid), so a program compiled in one
process (JAX's persistent cache, ``jax.export``) finds the same name in the next,
where this module builds and registers the handler again around that process's
copy of the kernel — or, in a process that never defined it, :mod:`.revive` does
from the copy of Warp's object :mod:`.cache` keeps in the cache.
"""

from __future__ import annotations

from typing import Any

from ...errors import KernelCompilationError
from ...ffi import abi
from ...ffi.handler_ir.signature import Signature
from ...ffi.naming import target_name
from .types import import_warp

__all__ = ["cpu_target", "launch_rank", "load_cpu", "target_for"]

_TEMPLATE_VERSION = "1"  # bump when the generated handler changes meaning


def load_cpu(kernel: Any) -> tuple[Any, int, str]:
    """Compile/load ``kernel`` on Warp's CPU device.

    Returns:
        ``(module executable, address of <name>_cpu_forward, module hash hex)``.

    Raises:
        KernelCompilationError: Warp has no CPU support or failed to build.
    """
    import ctypes

    wp = import_warp()
    if not wp.is_cpu_available():
        raise KernelCompilationError(
            f"warp_kernel '{kernel.key}': this Warp build has no CPU support "
            f"(wp.is_cpu_available() is False); install a warp-lang wheel built "
            f"with its LLVM/Clang CPU backend."
        )
    try:
        module_exec = kernel.module.load(wp.get_device("cpu"), 1)
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
    module_hash = module_exec.module_hash
    digest = module_hash.hex() if isinstance(module_hash, bytes) else str(module_hash)
    return module_exec, address, digest


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


def target_for(digest: str, name: str, sig: Signature, launch: Any) -> str:
    """The content-derived target name of a Warp CPU handler."""
    return target_name(
        "pk_warp",
        digest,
        name,
        sig.key(),
        repr(launch),
        _TEMPLATE_VERSION,
        f"{abi.API_MAJOR}.{abi.API_MINOR}",
    )


def cpu_target(owner: Any, sig: Signature, shapes: Any) -> tuple[str, dict]:
    """Register the handler for ``sig`` and return ``(target name, {})``."""
    import dataclasses

    from .cache import save
    from .cpu_handler import build_cpu_handler

    module_exec, address, digest = load_cpu(owner.kernel)
    plan = dataclasses.replace(owner.plan, launch_ndim=launch_rank(owner.kernel))
    launch = owner.launch_dims if owner.launch_dims is not None else 0
    name = module_exec.get_kernel_mangled_name(owner.kernel)
    target = target_for(digest, name, sig, launch)
    # A new process registers the same handler from a copy of Warp's object.
    parts = {
        "digest": digest,
        "name": name,
        "launch": launch,
        "plan": plan,
        "sig": sig,
        "label": owner.name,
        "entry": f"{name}_cpu_forward",
    }
    portable = save(target, parts, module_exec)
    build_cpu_handler(target, sig, owner.name, plan, address, launch, module_exec,
                      portable)  # fmt: skip
    return target, {}
