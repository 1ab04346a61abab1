"""The one XLA FFI target registry: every target polykernel registers goes through here.

Numba handlers, native modules (content-versioned and documented names), Warp's CPU
handlers, the GPU launcher, Numba-CUDA callables and targets users register by hand
all call :func:`register`, the only caller of ``jax.ffi.register_ffi_target`` in the
package. What it guarantees for every one of them:

- **Once per (name, platform), by content.** Each target carries an *identity* (a
  digest of what its handler does). The same name with the same identity again is a
  no-op; with a different identity it is refused with
  :class:`~polykernel.errors.KernelRegistrationError`, because XLA keeps the first
  handler of a name (the CPU registry refuses a second, the CUDA one silently keeps
  the first): a stale kernel must never run under a reused name.
- **After the CPU backend exists.** ``jax.devices("cpu")`` runs first: a handler
  registered before the backend starts is only checked when it starts, and a bad one
  then breaks every JAX operation in the process (feasibility study, 2.1.4).
- **Alive for the process.** Whatever owns the handler's machine code is kept: XLA
  holds a raw function pointer.
- **Listed and revivable.** :func:`records` is what ``list_registered_targets``, the
  export allow-list and ``load_exported`` read. A backend declares, with
  :func:`add_reviver`, the names it can bring back in a new process from the cache
  alone; :func:`revive` asks it.

Importing this module imports neither JAX nor any backend.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import KernelRegistrationError
from ..platforms import XlaPlatform, xla_platform

__all__ = [
    "Reviver",
    "Target",
    "add_reviver",
    "list_registered_targets",
    "lookup",
    "names",
    "records",
    "register",
    "revive",
    "reviver_for",
]

#: ``hook(target name, exported program text) -> bool``: register the target from
#: the cache (True) or say it cannot (False); it may raise our errors to say why.
Reviver = Callable[[str, str], bool]


@dataclass(frozen=True)
class Target:
    """One registered FFI target.

    Attributes:
        name: the target name XLA knows.
        platform: XLA's platform it is filed under.
        identity: what the handler does, as a digest (same identity: same handler).
        backend: the kernel technology (or ``"user"``) that registered it.
        label: the kernel or function it runs, for messages.
        address: the handler's address.
        portable: a new process can register it again from the cache alone.
        note: why it is not portable (empty when it is).
    """

    name: str
    platform: XlaPlatform
    identity: str
    backend: str
    label: str
    address: int
    portable: bool = True
    note: str = ""


_lock = threading.RLock()
_targets: dict[tuple[str, XlaPlatform], Target] = {}
_keepalive: list[Any] = []
_revivers: list[tuple[re.Pattern[str], str, Reviver]] = []


def _platform(name: str, platform: str) -> XlaPlatform:
    found = xla_platform(platform)
    if found is None:
        raise KernelRegistrationError(
            f"polykernel.ffi: FFI target '{name}': unknown platform {platform!r}; "
            f"expected one of {[p.value for p in XlaPlatform]}."
        )
    return found


def register(
    name: str,
    address: int,
    *,
    platform: str,
    identity: str,
    backend: str,
    label: str = "",
    owner: Any = None,
    portable: bool = True,
    note: str = "",
) -> bool:
    """Register the handler at ``address`` as FFI target ``name`` on ``platform``.

    Returns True if this call registered it, False if it already was (same identity).

    Raises:
        KernelRegistrationError: ``name`` already names a handler of another identity
            on that platform, or ``platform`` is unknown.

    Example:
        >>> register("pk_demo", cfunc.address, platform="cpu", identity="abc",
        ...          backend="numba", owner=cfunc)            # doctest: +SKIP
        True
    """
    xla = _platform(name, platform)
    with _lock:
        known = _targets.get((name, xla))
        if known is not None:
            if known.identity == identity:
                return False
            raise KernelRegistrationError(
                f"polykernel.ffi: cannot register FFI target '{name}' ({xla.value}): "
                f"it already names different content: {known.backend} "
                f"'{known.label or known.name}' (identity {known.identity[:40]}), "
                f"requested {backend} '{label or name}' (identity {identity[:40]}). "
                f"XLA keeps the first handler of a name (compiled executables hold "
                f"it), so the new one would never run: register it under another "
                f"name."
            )
        import jax

        jax.devices("cpu")
        jax.ffi.register_ffi_target(
            name, jax.ffi.pycapsule(address), platform=xla.value
        )
        _targets[(name, xla)] = Target(
            name, xla, identity, backend, label, address, portable, note
        )
        _keepalive.append(owner)
        return True


def lookup(name: str, platform: str | None = None) -> Target | None:
    """The record of ``name`` (on ``platform``, else on any platform), or None."""
    with _lock:
        if platform is not None:
            xla = xla_platform(platform)
            return _targets.get((name, xla)) if xla is not None else None
        return next((t for (n, _), t in _targets.items() if n == name), None)


def records() -> list[Target]:
    """Every target registered in this process, sorted by name then platform."""
    with _lock:
        return [_targets[k] for k in sorted(_targets)]


def names() -> list[str]:
    """Sorted names of every registered target (a name on two platforms once)."""
    with _lock:
        return sorted({name for name, _ in _targets})


def list_registered_targets() -> list[str]:
    """Sorted names of every FFI target polykernel registered in this process.

    Numba handlers, native modules (content-versioned and documented names), Warp
    handlers, the GPU launcher, Numba-CUDA callables and targets registered by hand.

    Example:
        >>> import polykernel as pk
        >>> isinstance(pk.list_registered_targets(), list)
        True
    """
    return names()


def add_reviver(backend: str, pattern: str, hook: Reviver) -> None:
    """Declare that ``backend`` can register targets whose name matches ``pattern``
    (a regular expression, matched whole) from the cache in a new process.

    Idempotent for the same backend and pattern.
    """
    compiled = re.compile(pattern)
    with _lock:
        for i, (known, owner, _) in enumerate(_revivers):
            if known.pattern == compiled.pattern and owner == backend:
                _revivers[i] = (compiled, backend, hook)
                return
        _revivers.append((compiled, backend, hook))


def reviver_for(name: str) -> tuple[str, Reviver] | None:
    """``(backend, hook)`` of the reviver whose pattern matches ``name``, or None."""
    with _lock:
        for pattern, backend, hook in _revivers:
            if pattern.fullmatch(name):
                return backend, hook
    return None


def revive(name: str, program: str = "") -> bool | None:
    """Register ``name`` from the cache through its backend's reviver.

    Returns None when no backend claims the name, else whether it is registered now.
    ``program`` is the text of the exported program that calls it (a reviver may
    need the call's attributes, e.g. the GPU launcher's kernel ids).
    """
    found = reviver_for(name)
    if found is None:
        return None
    return bool(found[1](name, program))
