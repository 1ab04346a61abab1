"""Which platform a kernel is being lowered for, visible to the kernel's callable.

A kernel generator may be registered for several platforms (``def_kernel('triton',
'cpu', kg)`` and ``def_triton_kernel(kg)``) and return the same kind of callable for
each. That callable must still emit platform-specific code: a CUDA custom call on
``gpu``, an emulator (Triton's interpreter, Numba's CUDA simulator) on ``cpu``. The
lowering rule sets the platform here while it traces the kernel; outside a lowering
(a backend callable used on its own) :func:`current_platform` falls back to JAX's
default backend, and a backend may instead emit ``jax.lax.platform_dependent`` when
:func:`gpu_visible` says both platforms exist. A leaf module: backends import it
without importing the primitive.

Example:
    >>> from polykernel.contract.platform_context import lowering_for, current_platform
    >>> with lowering_for("gpu"):
    ...     current_platform()
    'gpu'
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = [
    "current_lowering_platform",
    "current_platform",
    "gpu_visible",
    "lowering_for",
    "lowering_platform",
    "traced_for_gpu",
]

_PLATFORM: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "polykernel_lowering_platform", default=None
)


@contextlib.contextmanager
def lowering_for(platform: str) -> Iterator[None]:
    """Mark ``platform`` (``'cpu'``, ``'gpu'``, ``'tpu'``) as the one being lowered."""
    token = _PLATFORM.set(platform)
    try:
        yield
    finally:
        _PLATFORM.reset(token)


def lowering_platform() -> str | None:
    """The platform a primitive is being lowered for, or None outside a lowering."""
    return _PLATFORM.get()


def gpu_visible() -> bool:
    """Whether JAX has a GPU backend in this process (then code may run on either)."""
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


# The reference-style name some backends read.
current_lowering_platform = lowering_platform


def current_platform() -> str:
    """The platform being lowered, else that of JAX's default device.

    The default device honours ``jax.default_device(...)`` (GPU tests put their calls
    there while the CPU stays the process default), else it is the first device.
    """
    platform = _PLATFORM.get()
    if platform is not None:
        return platform
    from .._jax_compat import default_device_platform

    return default_device_platform()


def traced_for_gpu() -> bool:
    """True when the call being traced will run on a GPU (:func:`current_platform`)."""
    return current_platform() == "gpu"
