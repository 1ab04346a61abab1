"""Which platform a primitive is being lowered for, as seen from inside a kernel.

A kernel generator is called without a platform argument (the reference API's
signature), and one generator may be registered for several platforms, e.g. a Pallas
kernel for ``'cpu'`` (interpret mode) and ``'gpu'`` (Triton). The lowering rule of
:class:`~polykernel.XLACustomKernel` knows the platform, so it records it here while
the generator runs and its kernel is traced; helpers such as
:func:`polykernel.pallas_kernel` read it to pick the platform's code path.

A leaf module (standard library only), so any layer may import it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["current_platform", "lowering_for"]

_PLATFORM: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "polykernel_lowering_platform", default=None
)


def current_platform() -> str | None:
    """The platform (``'cpu'``, ``'gpu'``, ``'tpu'``) being lowered for, or ``None``.

    ``None`` outside the lowering rule of an ``XLACustomKernel``, e.g. when a kernel
    helper is called directly under ``jax.jit``.

    Example:
        >>> current_platform() is None
        True
        >>> with lowering_for("gpu"):
        ...     current_platform()
        'gpu'
    """
    return _PLATFORM.get()


@contextlib.contextmanager
def lowering_for(platform: str) -> Iterator[None]:
    """Record ``platform`` as the lowering platform for the duration of the block."""
    token = _PLATFORM.set(platform)
    try:
        yield
    finally:
        _PLATFORM.reset(token)
