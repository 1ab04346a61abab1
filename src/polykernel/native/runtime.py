"""Register a compiled function as an XLA FFI target by hand, and list targets.

``register_ffi_target`` is the reference API's manual registration: idempotent for
the same content, refused (``KernelRegistrationError``) for different content under
a name already taken, because XLA cannot re-point a live target (the CPU registry
rejects a second handler; the CUDA one silently keeps the first). ``replace=True``
is refused the same way, as in the reference. Modules stay loaded for the process
lifetime: executables compiled earlier hold raw pointers into them.

``list_registered_targets`` lists every target polykernel registered in this
process: by hand, by ``load_*`` (content-versioned and documented names), and the
Numba handlers of ``numba_kernel``.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import KernelRegistrationError, KernelTypeError
from .compiled import CompiledModule

__all__ = ["list_registered_targets", "register_ffi_target"]

_lock = threading.Lock()
_identity: dict[str, tuple[str, str, str]] = {}  # target -> (content, func, platform)
_keepalive: list[Any] = []

# Spellings JAX accepts, mapped to the one XLA registers under.
_PLATFORMS = {
    "cpu": "cpu",
    "host": "cpu",
    "cuda": "CUDA",
    "gpu": "CUDA",
    "rocm": "ROCM",
}


def _xla_platform(platform: object) -> str:
    if not isinstance(platform, str):
        raise KernelTypeError(
            f"register_ffi_target: platform must be a string such as 'CUDA' or 'cpu' "
            f"(got {type(platform).__name__}: {platform!r})."
        )
    try:
        return _PLATFORMS[platform.lower()]
    except KeyError:
        raise KernelRegistrationError(
            f"register_ffi_target: unknown platform {platform!r}; expected 'CUDA', "
            "'cpu' or 'ROCM'."
        ) from None


def _check_arguments(target_name: object, module: object, func_name: object) -> None:
    if not isinstance(target_name, str) or not isinstance(func_name, str):
        raise KernelTypeError(
            "register_ffi_target: target_name and func_name must be strings (got "
            f"{type(target_name).__name__} and {type(func_name).__name__})."
        )
    if not target_name:
        raise KernelRegistrationError("register_ffi_target: target_name is empty.")
    if not isinstance(module, CompiledModule):
        raise KernelTypeError(
            f"register_ffi_target: module must be a CompiledModule (what load_* "
            f"returns, or CompiledModule(so_path, names)); got {type(module).__name__}."
        )


def register_ffi_target(
    target_name: str,
    module: CompiledModule,
    func_name: str,
    *,
    platform: str = "CUDA",
    replace: bool = False,
    content_id: str | None = None,
) -> None:
    """Register ``module``'s handler for ``func_name`` as FFI target ``target_name``.

    Afterwards ``jax.ffi.ffi_call(target_name, ...)`` calls it. Registering the same
    content again (same ``content_id``, else the same library bytes, function and
    platform) does nothing.

    Args:
        target_name: The FFI target name, unique in the process.
        module: The loaded module (a ``CompiledModule``, e.g. from ``load_*``).
        func_name: The function within ``module``.
        platform: ``"CUDA"`` (default), ``"cpu"`` or ``"ROCM"`` (any case).
        replace: Kept for the reference's signature; a different handler under a
            taken name is refused either way, since XLA cannot re-point it.
        content_id: A deterministic identity of the content (e.g. a cache key), used
            instead of the library's byte hash.

    Raises:
        KernelRegistrationError: ``target_name`` already names different content.
        KernelLookupError: ``module`` has no function ``func_name``.

    Example:
        >>> mod = pk.load_cpp_inline("m", SRC, ["f"])               # doctest: +SKIP
        >>> pk.register_ffi_target("my.f", mod, "f", platform="cpu")  # doctest: +SKIP
    """
    import jax

    _check_arguments(target_name, module, func_name)
    xla_platform = _xla_platform(platform)
    handler = module.get_handler(func_name)
    key = (content_id or _content_of(module), func_name, xla_platform)
    with _lock:
        existing = _identity.get(target_name) or _other_identity(target_name)
        if existing is not None:
            if existing == key:
                return
            action = "replace" if replace else "register"
            raise KernelRegistrationError(
                f"register_ffi_target: cannot {action} '{target_name}': it already "
                f"names different content (registered {existing}, requested {key}). "
                "XLA cannot re-point a live FFI target (compiled executables keep the "
                "old handler), so register the new build under a distinct name."
            )
        if xla_platform == "cpu":
            jax.devices("cpu")  # see ffi/registry.py: register after the backend
        capsule = jax.ffi.pycapsule(handler)
        jax.ffi.register_ffi_target(target_name, capsule, platform=xla_platform)
        _identity[target_name] = key
        _keepalive.append(module)


def _loader_targets() -> dict[str, tuple[str, str, str]]:
    """Targets ``load_*`` registered: name -> (content, function, platform)."""
    from . import pipeline

    found: dict[str, tuple[str, str, str]] = {}
    with pipeline._lock:
        modules = list(pipeline._modules.values())
        public = dict(pipeline._public)
    for module in modules:
        platform = "CUDA" if module.platform == "cuda" else "cpu"
        for fname, fn in module.functions.items():
            identity = (f"key:{module.key}", fname, platform)
            found[fn.target] = identity
            if public.get((fn.public_target, platform)) == module.key:
                found[fn.public_target] = identity
    return found


def _other_identity(target_name: str) -> tuple[str, str, str] | None:
    """Identity of ``target_name`` if ``load_*`` or ``numba_kernel`` registered it."""
    from ..ffi.registry import registered_targets

    if target_name in registered_targets():
        return ("numba_kernel handler", target_name, "cpu")
    return _loader_targets().get(target_name)


def _content_of(module: CompiledModule) -> str:
    # A module from load_* is identified by its cache key (a digest of source,
    # specs, flags and toolchain), like the targets load_* registered itself.
    key = module.__dict__.get("key")
    return f"key:{key}" if isinstance(key, str) else module.content_hash


def list_registered_targets() -> list[str]:
    """Sorted names of every FFI target polykernel registered in this process.

    Example:
        >>> import polykernel as pk
        >>> isinstance(pk.list_registered_targets(), list)
        True
    """
    from ..ffi.registry import registered_targets

    with _lock:
        names = set(_identity)
    names.update(_loader_targets())
    names.update(registered_targets())
    return sorted(names)
