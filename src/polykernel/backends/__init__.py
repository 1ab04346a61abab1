"""The backend table: every kernel technology polykernel knows, by name.

One subpackage per built-in technology, all of the same shape
(``backends/<technology>/``: its kernel wrapper, what it builds and caches, and a
``backend.py`` holding its :class:`~polykernel.contract.protocol.Backend`):
``numba``, ``numba_cuda``, ``warp``, ``pallas``, ``triton``, ``cuda_raw`` and
``jax_raw``. A backend written outside polykernel joins the table with
:func:`register_backend`, or by declaring an entry point in the group
``polykernel.backends`` (loaded the first time the table is listed or a name is not
found); see ``docs/architecture.md``. A plugin is isolated (:mod:`.plugins`): an entry
point that gives no valid backend is one ``PolykernelWarning`` and a row of
``polykernel info`` (:func:`info_rows`, which also survives a backend's broken
``usable``/``info_rows`` hook, :mod:`.rows`), and is skipped.

This table is the one place that maps backend names to their objects: generic code
asks it (:func:`lookup`, :func:`all_backends`) instead of comparing names. Importing
it imports no backend: a built-in one is imported the first time it is asked for,
and then only its protocol object (no optional package).
"""

from __future__ import annotations

import importlib
import threading
import warnings

from ..contract.backend_fields import check_fields
from ..contract.protocol import Backend, InfoRow
from ..errors import KernelRegistrationError, KernelTypeError, PolykernelWarning
from ..ffi import targets
from . import plugins
from .rows import rows_of

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "all_backends",
    "backend_names",
    "broken_plugins",
    "info_rows",
    "install_revivers",
    "lookup",
    "reference_backends",
    "register_backend",
]

#: The built-in backends: name -> module holding its ``BACKEND``.
BUILTIN: dict[str, str] = {
    "numba": "polykernel.backends.numba.backend",
    "numba_cuda": "polykernel.backends.numba_cuda.backend",
    "warp": "polykernel.backends.warp.backend",
    "pallas": "polykernel.backends.pallas.backend",
    "triton": "polykernel.backends.triton.backend",
    "cuda_raw": "polykernel.backends.cuda_raw.backend",
    "jax_raw": "polykernel.backends.jax_raw.backend",
}
#: Targets that belong to shared infrastructure rather than one backend:
#: name -> (module holding ``PATTERN`` and ``revive``).
INFRASTRUCTURE: dict[str, str] = {"gpu_launcher": "polykernel.launcher.revive"}
#: The entry-point group through which installed packages add backends.
ENTRY_POINT_GROUP = "polykernel.backends"

_lock = threading.RLock()
_loaded: dict[str, Backend] = {}
_entry_points_read = False
_broken: list[plugins.BrokenPlugin] = []
_revivers_installed: set[str] = set()


def register_backend(backend: Backend, *, replace: bool = False) -> Backend:
    """Add ``backend`` to the table (a backend written outside polykernel).

    Afterwards ``def_kernel(backend.name, ...)`` generators can return its kernels,
    ``polykernel info`` lists it, its lowering context is entered around its
    kernels, and ``load_exported`` asks it to revive targets matching its
    ``target_pattern``.

    Args:
        backend: its protocol object.
        replace: allow replacing a backend of the same name.

    Returns:
        ``backend``.

    Raises:
        KernelTypeError: ``backend`` is not a ``polykernel.Backend``, or a field has
            the wrong type.
        KernelRegistrationError: a field has a bad value (see ``polykernel.Backend``),
            or the name is taken (a built-in one, or another registered object) and
            ``replace`` is False. Nothing is registered then: the name stays free.

    Example:
        >>> import polykernel as pk
        >>> b = pk.register_backend(pk.Backend(name="doc_backend"))
        >>> pk.backends.lookup("doc_backend") is b
        True
    """
    if not isinstance(backend, Backend):
        raise KernelTypeError(
            f"register_backend: expected a polykernel.Backend, got "
            f"{type(backend).__name__}. Subclass polykernel.Backend (or instantiate "
            f"it) to describe the technology."
        )
    # Checked again, before the name is taken: fields are plain attributes.
    check_fields(backend)
    with _lock:
        known = _loaded.get(backend.name)
        taken = backend.name in BUILTIN or (known is not None and known is not backend)
        if taken and not replace:
            raise KernelRegistrationError(
                f"register_backend: the backend name '{backend.name}' is taken (by "
                f"{'a built-in backend' if backend.name in BUILTIN else known!r}); "
                f"pick another name, or pass replace=True."
            )
        _loaded[backend.name] = backend
        _revivers_installed.discard(backend.name)
    _install(backend)
    return backend


def lookup(name: str) -> Backend | None:
    """The backend called ``name``, or None when no one registered it."""
    with _lock:
        found = _loaded.get(name)
        if found is not None:
            return found
        module = BUILTIN.get(name)
        if module is not None:
            found = importlib.import_module(module).BACKEND
            _loaded.setdefault(name, found)
            return _loaded[name]
    _read_entry_points()
    with _lock:
        return _loaded.get(name)


def all_backends() -> list[Backend]:
    """Every backend: built-in ones in the table's order, then the others."""
    _read_entry_points()
    found = [lookup(name) for name in BUILTIN]
    with _lock:
        extra = [b for n, b in _loaded.items() if n not in BUILTIN]
    return [b for b in found if b is not None] + extra


def backend_names() -> list[str]:
    """The names of :func:`all_backends`."""
    return [b.name for b in all_backends()]


def reference_backends() -> list[str]:
    """Names of the backends that are pure references (compared against)."""
    return [b.name for b in all_backends() if b.reference]


def broken_plugins() -> list[plugins.BrokenPlugin]:
    """The entry points of the group that gave no backend (each was warned about
    once and skipped), in the order they were read."""
    _read_entry_points()
    with _lock:
        return list(_broken)


def info_rows(gpu: bool) -> list[InfoRow]:
    """The rows of ``polykernel info``: every backend's (a broken ``usable`` or
    ``info_rows`` hook is a row saying so), then one per broken plugin."""
    rows = [row for b in all_backends() for row in rows_of(b, gpu)]
    return rows + [p.row() for p in broken_plugins()]


def install_revivers() -> None:
    """Declare every backend's (and the GPU launcher's) reviver to the registry."""
    for backend in all_backends():
        _install(backend)
    for name, module in INFRASTRUCTURE.items():
        with _lock:
            if name in _revivers_installed:
                continue
            _revivers_installed.add(name)
        infra = importlib.import_module(module)
        targets.add_reviver(name, infra.PATTERN, infra.revive, builtin=True)


def _install(backend: Backend) -> None:
    with _lock:
        if backend.name in _revivers_installed or backend.target_pattern is None:
            return
        _revivers_installed.add(backend.name)
    # Built-in revivers are asked first: a plugin's broad pattern cannot shadow them.
    targets.add_reviver(backend.name, backend.target_pattern, backend.revive,
                        builtin=backend.name in BUILTIN)  # fmt: skip


def _read_entry_points() -> None:
    global _entry_points_read
    with _lock:
        if _entry_points_read:
            return
        _entry_points_read = True
    try:
        points = plugins.entry_points(ENTRY_POINT_GROUP)
    except plugins.PluginError as err:  # no entry point can be read: one record
        found = [plugins.BrokenPlugin("*", "*", "", str(err))]
    else:
        found = [b for point in points if (b := _add_entry_point(point)) is not None]
    with _lock:
        _broken.extend(found)
    # Warned once every good plugin is in: under -W error the first warning raises.
    for plugin in found:
        warnings.warn(plugin.message(), PolykernelWarning, stacklevel=3)


def _add_entry_point(point: object) -> plugins.BrokenPlugin | None:
    """Add the backend of ``point`` to the table; the record of why not, if not."""
    try:
        backend = plugins.backend_of(point)
    except plugins.PluginError as err:
        return plugins.broken(point, str(err))
    with _lock:
        known = _loaded.get(backend.name)
        if backend.name not in BUILTIN and (known is None or known is backend):
            _loaded[backend.name] = backend
            return None
    owner = "a built-in backend" if backend.name in BUILTIN else repr(known)
    return plugins.broken(
        point, f"its backend name '{backend.name}' is taken by {owner}"
    )
