"""Which platform a primitive is being lowered for, seen from inside its kernel.

A kernel generator's function is traced inside the primitive's per-platform
lowering rule, where JAX gives it no way to ask which platform that is. Backends
whose one wrapper has a GPU path and a CPU emulator path (Numba-CUDA's simulator,
Triton's interpreter) read it here; :mod:`polykernel.lowering` sets it. Outside a
primitive it is None and those wrappers follow ``jax.default_backend()``.

Example:
    >>> current_lowering_platform() is None
    True
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["current_lowering_platform", "lowering_for", "traced_for_gpu"]

_platform: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "polykernel_lowering_platform", default=None
)


def current_lowering_platform() -> str | None:
    """``'cpu'``, ``'gpu'`` or ``'tpu'`` while a primitive lowers, else None."""
    return _platform.get()


@contextlib.contextmanager
def lowering_for(platform: str) -> Iterator[None]:
    """Mark the code inside as lowering for ``platform``."""
    token = _platform.set(platform)
    try:
        yield
    finally:
        _platform.reset(token)


def traced_for_gpu() -> bool:
    """True when the call being traced will run on a GPU.

    Inside a primitive: the platform being lowered. Outside one: JAX's default
    device (``jax.default_device(...)``, else the first device) is a GPU.
    """
    platform = current_lowering_platform()
    if platform is not None:
        return platform == "gpu"
    import jax

    device = jax.config.jax_default_device or jax.devices()[0]
    if isinstance(device, str):  # jax_default_device may name a platform
        return device in ("gpu", "cuda")
    return device.platform in ("gpu", "cuda")
