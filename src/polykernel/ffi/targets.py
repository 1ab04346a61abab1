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
- **Checked before XLA sees it, without starting JAX.** A handler registered
  before a JAX backend starts is only checked by XLA when the backend starts, and a
  bad one then breaks every JAX operation in the process (feasibility study,
  2.1.4). Starting the backend first would break the user's later
  ``jax.distributed.initialize`` or ``jax_num_cpu_devices``, since libraries load
  kernels at import. So before a backend exists, the registry asks the handler the
  same metadata query XLA will (:mod:`.metadata`) and refuses it unless it answers
  with an FFI API version this jaxlib accepts; once a backend exists, XLA checks it
  at once and its refusal is our error too.
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
from .artefact import Artefact

__all__ = [
    "Reviver",
    "Target",
    "add_reviver",
    "check_handler",
    "list_registered_targets",
    "lookup",
    "names",
    "records",
    "register",
    "revive",
    "reviver_for",
    "revivers_for",
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
        artefact: the shared object holding the handler, loadable with no
            compiler (:mod:`.artefact`), when the backend built one.
    """

    name: str
    platform: XlaPlatform
    identity: str
    backend: str
    label: str
    address: int
    portable: bool = True
    note: str = ""
    artefact: Artefact | None = None


@dataclass(frozen=True)
class _Reviver:
    pattern: re.Pattern[str]
    backend: str
    hook: Reviver
    builtin: bool


_lock = threading.RLock()
_targets: dict[tuple[str, XlaPlatform], Target] = {}
_keepalive: list[Any] = []
_revivers: list[_Reviver] = []


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
    artefact: Artefact | None = None,
) -> bool:
    """Register the handler at ``address`` as FFI target ``name`` on ``platform``.

    Returns True if this call registered it, False if it already was (same identity).

    Raises:
        KernelRegistrationError: ``name`` already names a handler of another identity
            on that platform, or ``platform`` is unknown.

    Example:
        >>> import polykernel as pk
        >>> from polykernel.ffi.targets import register
        >>> src = "void keep(pk::Tensor& y) {}"  # a handler to register: any will do
        >>> mod = pk.load_cpp_inline("doc_register", src, ["keep"])
        >>> address = mod.keep.handler_address
        >>> register("doc.keep", address, platform="cpu", identity="doc.keep",
        ...          backend="cuda_raw", owner=mod)
        True
        >>> register("doc.keep", address, platform="cpu", identity="doc.keep",
        ...          backend="cuda_raw", owner=mod)  # the same identity again: a no-op
        False
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
        _hand_to_xla(name, address, xla, backend, label)
        _targets[(name, xla)] = Target(
            name, xla, identity, backend, label, address, portable, note, artefact
        )
        _keepalive.append(owner)
        return True


def _hand_to_xla(
    name: str, address: int, xla: XlaPlatform, backend: str, label: str
) -> None:
    """``jax.ffi.register_ffi_target``, never starting a JAX backend for it."""
    import jax

    from .._jax_compat import backends_initialised

    where = f"polykernel.ffi: FFI target '{name}' ({backend} '{label or name}')"
    if not backends_initialised():
        check_handler(where, address)
    try:
        jax.ffi.register_ffi_target(
            name, jax.ffi.pycapsule(address), platform=xla.value
        )
    except Exception as err:  # XLA refused it (only when a backend already exists)
        raise KernelRegistrationError(
            f"{where}: XLA refused the handler on {xla.value}: {err}"
        ) from err


def check_handler(where: str, address: int) -> None:
    """Refuse a handler XLA would refuse, by asking it XLA's metadata query.

    Raises:
        KernelRegistrationError: the handler errs on the query, or answers an FFI
            API version this jaxlib does not accept (its major, minor 1 to its own).
    """
    from . import abi
    from .metadata import query_metadata

    try:
        answer = query_metadata(address)
    except KernelRegistrationError as err:
        raise KernelRegistrationError(f"{where}: {err}") from err
    major, minor = abi.installed_api_version()
    got = answer.api_version
    if got[0] != major or not 1 <= got[1] <= minor:
        raise KernelRegistrationError(
            f"{where}: the handler answers XLA's metadata query with FFI API version "
            f"{got[0]}.{got[1]}, but this jaxlib accepts {major}.1 to "
            f"{major}.{minor}; rebuild it against the installed jaxlib's FFI header "
            f"(polykernel's generated handlers answer a version every supported "
            f"jaxlib accepts)."
        )


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


def add_reviver(backend: str, pattern: str, hook: Reviver, *,
                builtin: bool = False) -> None:  # fmt: skip
    """Declare that ``backend`` can register targets whose name matches ``pattern``
    (a regular expression, matched whole) from the cache in a new process.

    One reviver per backend: declaring again replaces its pattern and hook. Built-in
    revivers (``builtin``) are asked before the others, whatever the order they were
    declared in, so a plugin's broad pattern (``.*``) cannot shadow them.

    Raises:
        KernelRegistrationError: ``pattern`` is not a regular expression.
    """
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        raise KernelRegistrationError(
            f"polykernel.ffi: the reviver of backend '{backend}': target pattern "
            f"{pattern!r} is not a regular expression ({err})."
        ) from err
    entry = _Reviver(compiled, backend, hook, builtin)
    with _lock:
        kept = [entry if r.backend == backend else r for r in _revivers]
        if entry not in kept:
            kept.append(entry)
        # Stable: declaration order within built-in ones and within the others.
        _revivers[:] = sorted(kept, key=lambda r: not r.builtin)


def revivers_for(name: str) -> list[tuple[str, Reviver]]:
    """``(backend, hook)`` of every reviver whose pattern matches ``name``, in the
    order they are asked: built-in ones first, then in declaration order."""
    with _lock:
        return [(r.backend, r.hook) for r in _revivers if r.pattern.fullmatch(name)]


def reviver_for(name: str) -> tuple[str, Reviver] | None:
    """``(backend, hook)`` of the first reviver asked for ``name``, or None."""
    found = revivers_for(name)
    return found[0] if found else None


def revive(name: str, program: str = "") -> bool | None:
    """Register ``name`` from the cache through the revivers whose pattern matches.

    Each is asked in turn (:func:`revivers_for`) until one registers it; one that
    declines (returns False) lets the next try. Returns None when no backend claims
    the name, else whether it is registered now. ``program`` is the text of the
    exported program that calls it (a reviver may need the call's attributes, e.g.
    the GPU launcher's kernel ids).
    """
    found = revivers_for(name)
    if not found:
        return None
    return any(bool(hook(name, program)) for _, hook in found)
