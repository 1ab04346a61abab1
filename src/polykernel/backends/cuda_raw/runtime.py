"""``register_ffi_target``: register a compiled function as an XLA FFI target by hand.

The reference API's manual registration, through the one target registry
(:mod:`polykernel.ffi.targets`): idempotent for the same content, refused
(``KernelRegistrationError``) for different content under a name already taken,
because XLA cannot re-point a live target (the CPU registry rejects a second handler;
the CUDA one silently keeps the first). ``replace=True`` is refused the same way, as
in the reference. Modules stay loaded for the process lifetime: executables compiled
earlier hold raw pointers into them.
"""

from __future__ import annotations

import ctypes

from ...errors import KernelRegistrationError, KernelTypeError
from ...ffi import targets
from ...platforms import xla_platform
from .build import forwarded_identity, identity
from .compiled import CompiledModule

__all__ = ["register_ffi_target"]


def _platform(platform: object) -> str:
    if not isinstance(platform, str):
        raise KernelTypeError(
            f"register_ffi_target: platform must be a string such as 'CUDA' or 'cpu' "
            f"(got {type(platform).__name__}: {platform!r})."
        )
    found = xla_platform(platform)
    if found is None:
        raise KernelRegistrationError(
            f"register_ffi_target: unknown platform {platform!r}; expected 'CUDA', "
            "'cpu' or 'ROCM'."
        )
    return found


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
        >>> import jax, jax.numpy as jnp, polykernel as pk
        >>> src = '''void add_one(const pk::Tensor& x, pk::Tensor& y) {
        ...   const float* in = x.data_ptr<float>();
        ...   float* out = y.data_ptr<float>();
        ...   for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] + 1;
        ... }'''
        >>> mod = pk.load_cpp_inline("doc_ffi_target", src, ["add_one"])
        >>> pk.register_ffi_target("my.add_one", mod, "add_one", platform="cpu")
        >>> x = jnp.arange(3.0, dtype=jnp.float32)
        >>> call = jax.ffi.ffi_call("my.add_one", jax.ShapeDtypeStruct((3,), x.dtype))
        >>> call(x).tolist()
        [1.0, 2.0, 3.0]
    """
    _check_arguments(target_name, module, func_name)
    xla = _platform(platform)
    handler = module.get_handler(func_name)
    address = ctypes.cast(handler, ctypes.c_void_p).value or 0
    wanted = _identity(module, func_name, content_id)
    action = "replace" if replace else "register"
    current = forwarded_identity(target_name, xla)
    if current is not None:  # a loaded module's documented name
        if current == wanted:
            return
        raise KernelRegistrationError(
            f"register_ffi_target: cannot {action} '{target_name}': it already names "
            f"different content, the latest build of the native module that "
            f"published it. Load that module again with the new source to point the "
            f"name at it, or register under another name."
        )
    try:
        targets.register(
            target_name,
            address,
            platform=xla,
            identity=wanted,
            backend="user",
            label=f"{module.name}.{func_name}",
            owner=module,
            portable=False,
            note="registered by hand with register_ffi_target",
        )
    except KernelRegistrationError as err:
        raise KernelRegistrationError(
            f"register_ffi_target: cannot {action} '{target_name}': {err}"
        ) from None


def _identity(module: CompiledModule, func_name: str, content_id: str | None) -> str:
    # A module from load_* is identified by its cache key (a digest of source,
    # specs, flags and toolchain), exactly like the targets load_* registered itself.
    if content_id is not None:
        return f"{content_id}:{func_name}"
    key = module.__dict__.get("key")
    if isinstance(key, str):
        return identity(key, func_name)
    return f"{module.content_hash}:{func_name}"
