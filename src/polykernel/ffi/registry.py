"""Register FFI targets with XLA once per name, safely.

- ``jax.devices("cpu")`` runs first: a handler registered before the CPU backend
  exists is only checked when the backend starts, and a bad one then breaks every
  JAX operation in the process (feasibility study, section 2.1.4).
- A name registers once. The same name with the same address again is a no-op; with
  a different address it is refused with a clear error, because XLA would keep the
  first handler (names are content-derived, see :mod:`.naming`, so this means a bug).
- Whatever owns the handler's machine code is kept alive for the process lifetime:
  XLA holds the raw function pointer.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import KernelRegistrationError

__all__ = ["register_cpu_target", "registered_targets"]

_lock = threading.Lock()
_targets: dict[str, int] = {}
_keepalive: list[Any] = []


def register_cpu_target(name: str, address: int, owner: Any = None) -> bool:
    """Register the handler at ``address`` as CPU FFI target ``name``.

    Returns True if this call registered it, False if it already was.

    Raises:
        KernelRegistrationError: ``name`` is registered to a different address.

    Example:
        >>> register_cpu_target("pk_numba_demo", cfunc.address, cfunc)  # doctest: +SKIP
        True
    """
    import jax

    with _lock:
        known = _targets.get(name)
        if known is not None:
            if known == address:
                return False
            raise KernelRegistrationError(
                f"polykernel.ffi: FFI target '{name}' is already registered to a "
                f"different handler ({known:#x}, new {address:#x}); XLA keeps the "
                f"first one. Use a different target name."
            )
        jax.devices("cpu")
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(address), platform="cpu")
        _targets[name] = address
        _keepalive.append(owner)
        return True


def registered_targets() -> dict[str, int]:
    """Snapshot of the CPU targets registered through polykernel (name -> address).

    Example:
        >>> isinstance(registered_targets(), dict)
        True
    """
    with _lock:
        return dict(_targets)
