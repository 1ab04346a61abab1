"""Which platform a primitive is being lowered for, visible to backends.

A backend that emits different custom calls per platform (Warp: an FFI handler on
CPU, the native GPU launcher on CUDA) asks :func:`lowering_platform` while its
kernel generator runs: :mod:`polykernel.lowering` sets it around each per-platform
lowering, so one ``jax.export`` for several platforms gets the right call in each.
Outside such a lowering it is None and backends use JAX's default backend.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["lowering_for", "lowering_platform"]

_platform: ContextVar[str | None] = ContextVar("polykernel_lowering", default=None)


def lowering_platform() -> str | None:
    """``"cpu"``, ``"gpu"`` or ``"tpu"`` inside a primitive's lowering, else None.

    Example:
        >>> with lowering_for("gpu"):
        ...     lowering_platform()
        'gpu'
    """
    return _platform.get()


@contextlib.contextmanager
def lowering_for(platform: str) -> Iterator[None]:
    """Mark the code inside as lowering for ``platform``."""
    token = _platform.set(platform)
    try:
        yield
    finally:
        _platform.reset(token)
