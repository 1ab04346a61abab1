"""``jax.export`` for programs that call polykernel kernels, across processes.

A serialised ``jax.export`` artefact names each kernel by its FFI target, and a
process that runs it must have every target registered first. polykernel's target
names are content-derived (no counters, no addresses), and every target goes through
the one registry (:mod:`polykernel.ffi.targets`), where each backend declares the
names it owns and how it registers one again from the persistent cache. This module
knows no backend: it reads the registry and asks its revivers. So a new process
needs neither the kernels' Python code nor their sources, only the same cache
directory (``POLYKERNEL_CACHE_DIR``) and the same software versions (a backend that
needs more, e.g. the module defining a function, says so in its error)::

    exported = pk.export(jax.jit(f))(x_spec)        # process 1
    blob = exported.serialize()

    exported = pk.load_exported(blob)               # process 2
    y = exported.call(x)

Stable names also make JAX's persistent compilation cache hit in the second process.
See ``docs/export.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from .. import backends
from ..errors import (
    KernelNotAvailableError,
    KernelRegistrationError,
    KernelTypeError,
    PolykernelWarning,
)
from ..ffi import targets

if TYPE_CHECKING:
    from jax.export import DisabledSafetyCheck, Exported
    from jax.stages import Wrapped

    from ..types import ExportedLike

__all__ = ["export", "exported_targets", "load_exported", "register_exported_targets"]

_CUSTOM_CALL = re.compile(r'stablehlo\.custom_call\s+@(?:"([^"]+)"|([\w.$-]+))')


def export(
    fun: Callable[..., Any],
    *,
    platforms: Sequence[str] | None = None,
    disabled_checks: Sequence[DisabledSafetyCheck] = (),
) -> Callable[..., Exported]:
    """``jax.export.export`` that accepts polykernel's FFI targets.

    ``jax.export`` refuses custom calls without a compatibility guarantee unless
    each target is named in ``disabled_checks``. polykernel's targets are
    content-derived, so this allows exactly those polykernel registered (plus the
    checks you pass); any other unknown custom call is still refused.

    Args:
        fun: The function to export (``jax.jit``-wrapped or plain).
        platforms: Lowering platforms, e.g. ``("cpu", "cuda")``; default: the
            platform of the default device.
        disabled_checks: More ``jax.export.DisabledSafetyCheck`` values.

    Returns:
        A function of the argument specs (``jax.ShapeDtypeStruct`` or arrays)
        returning a ``jax.export.Exported``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from polykernel import export
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> exported = export(jax.jit(jnp.sin))(spec)
        >>> exported.platforms
        ('cpu',)
    """
    import jax

    # a function with `.lower` is taken as already jitted (jax.jit's result)
    jitted = cast("Wrapped", fun) if hasattr(fun, "lower") else jax.jit(fun)
    extra = list(disabled_checks)

    def do_export(*args: Any, **kwargs: Any) -> Exported:
        for attempt in range(2):
            known = _polykernel_targets()
            allowed = [
                jax.export.DisabledSafetyCheck.custom_call(t) for t in sorted(known)
            ]
            exporter = jax.export.export(
                jitted, platforms=platforms, disabled_checks=[*extra, *allowed]
            )
            try:
                return _keep_checks_used(exporter(*args, **kwargs), known, extra)
            except ValueError:
                # Lowering builds (and registers) kernels it meets for the first
                # time; if it did, their names are allowed now: export again.
                if attempt or _polykernel_targets() == known:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    return do_export


def _keep_checks_used(
    exported: Exported, known: frozenset[str], extra: list
) -> Exported:
    """The artefact records its disabled checks: keep only the targets it calls,
    sorted, so it depends on neither set order nor what else the process built."""
    import dataclasses

    import jax

    used = [t for t in exported_targets(exported) if t in known]
    _warn_unportable(used)
    checks = (*extra, *(jax.export.DisabledSafetyCheck.custom_call(t) for t in used))
    return dataclasses.replace(exported, disabled_safety_checks=checks)


def _warn_unportable(used: list[str]) -> None:
    """Warn about targets another process cannot register from the cache alone."""
    import warnings

    for name in used:
        record = targets.lookup(name)
        if record is None or record.portable:
            continue
        warnings.warn(
            f"polykernel.export: {record.backend} kernel '{record.label or name}' "
            f"(FFI target '{name}') cannot be registered by another process from the "
            f"cache: {record.note}.",
            PolykernelWarning,
            stacklevel=4,
        )


def _polykernel_targets() -> frozenset[str]:
    return frozenset(targets.names())


def _as_exported(exported: object, caller: str = "load_exported") -> Exported:
    import jax

    if isinstance(exported, (bytes, bytearray, memoryview)):
        try:
            return jax.export.deserialize(bytearray(exported))
        except Exception as err:  # flatbuffers reports garbage in many ways
            raise KernelRegistrationError(
                f"polykernel.{caller}: these {len(exported)} bytes are not an artefact "
                f"this JAX ({jax.__version__}) can read ({type(err).__name__}: "
                f"{err}). Pass exactly what Exported.serialize() returned (read the "
                f"file in binary mode)."
            ) from err
    if isinstance(exported, jax.export.Exported):
        return exported
    raise KernelTypeError(
        f"polykernel.{caller}: expected the bytes of Exported.serialize() or a "
        f"jax.export.Exported, got {type(exported).__name__}. Serialise with "
        f"blob = exported.serialize() and pass blob."
    )


def _program_text(exported: Any, caller: str) -> str:
    import jax

    try:
        return exported.mlir_module()
    except Exception as err:  # a StableHLO this JAX cannot read
        theirs, ours = _stablehlo_versions(exported)
        convention = getattr(exported, "calling_convention_version", "?")
        if _newer(theirs, ours):
            why = (
                f"it was serialized as StableHLO {theirs} by a newer JAX, and this "
                f"JAX ({jax.__version__}) reads StableHLO up to {ours}"
            )
            fix = f"run it with a JAX that reads StableHLO {theirs}, or export it "
        else:
            why = (
                f"it names StableHLO {theirs} and this JAX ({jax.__version__}) reads "
                f"StableHLO up to {ours}, so the artefact is damaged or was written "
                f"by an incompatible JAX"
            )
            fix = "export it "
        raise KernelRegistrationError(
            f"polykernel.{caller}: cannot read the exported program (calling "
            f"convention {convention}): {why} ({type(err).__name__}: "
            f"{str(err).strip()[:300]}). To fix, {fix}again with this JAX."
        ) from err


def _newer(theirs: str, ours: str) -> bool:
    """Whether version ``theirs`` is above ``ours`` (False when either is unknown)."""
    try:
        return tuple(map(int, theirs.split("."))) > tuple(map(int, ours.split(".")))
    except ValueError:
        return False


def _stablehlo_versions(exported: Any) -> tuple[str, str]:
    """(the artefact's StableHLO version, the newest this jaxlib reads)."""
    blob = bytes(getattr(exported, "mlir_module_serialized", b"") or b"")
    found = re.search(rb"StableHLO_v(\d+\.\d+\.\d+)", blob)
    theirs = found.group(1).decode() if found else "of an unknown version"
    try:
        from jaxlib.mlir.dialects import stablehlo

        ours = str(stablehlo.get_current_version())
    except Exception:  # a jaxlib without the dialect's bindings
        ours = "an unknown version"
    return theirs, ours


def exported_targets(exported: ExportedLike) -> list[str]:
    """Sorted names of every custom-call target an exported program calls.

    Args:
        exported: A ``jax.export.Exported`` or the bytes of its ``serialize()``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from polykernel import exported_targets
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> exported_targets(jax.export.export(jax.jit(jnp.sin))(spec))
        []
    """
    exported = _as_exported(exported, "exported_targets")
    text = _program_text(exported, "exported_targets")
    return sorted({a or b for a, b in _CUSTOM_CALL.findall(text)})


def register_exported_targets(exported: ExportedLike) -> list[str]:
    """Register every polykernel target ``exported`` calls, from the caches.

    The kernels' Python code and sources are not needed: each target's backend
    registers it again from ``polykernel.get_cache_dir()`` by its content-derived
    name. Targets already registered in this process are kept; other custom calls
    (JAX's own, or your hand-registered ones) are left alone.

    Args:
        exported: A ``jax.export.Exported`` or the bytes of its ``serialize()``.

    Returns:
        The polykernel targets the program calls, sorted.

    Raises:
        KernelNotAvailableError: (an ``ImportError``) a target is in no cache.
        KernelRegistrationError: a target cannot be registered here (e.g. a
            parallel Numba handler needs a thread-safe threading layer), or the
            program cannot be read by this JAX.
        KernelTypeError: ``exported`` is neither bytes nor an ``Exported``.

    Example:
        >>> import jax, jax.numpy as jnp, numba, polykernel as pk
        >>> @numba.njit
        ... def double(x, out):
        ...     for i in range(out.size):
        ...         out[i] = 2 * x[i]
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> blob = pk.export(jax.jit(pk.numba_kernel(double, spec)))(spec).serialize()
        >>> pk.register_exported_targets(blob)  # in a new process, before deserializing
        ['pk_numba_...']
    """
    exported = _as_exported(exported, "register_exported_targets")
    text = _program_text(exported, "register_exported_targets")
    called = sorted({a or b for a, b in _CUSTOM_CALL.findall(text)})
    backends.install_revivers()
    present = _polykernel_targets()
    names = [t for t in called if t in present or targets.reviver_for(t) is not None]
    missing = []
    for name in names:
        if name in present:
            continue
        if not targets.revive(name, text):
            missing.append(name)
    if missing:
        raise _missing_error(missing)
    return names


def _missing_error(missing: list[str]) -> KernelNotAvailableError:
    from ..settings.paths import cache_root

    owners = {m: (targets.reviver_for(m) or ("?", None))[0] for m in missing}
    listing = ", ".join(f"'{m}' ({owners[m]})" for m in missing)
    return KernelNotAvailableError(
        f"polykernel.load_exported: the exported program calls FFI target(s) "
        f"{listing}, found neither registered in this process nor loadable from the "
        f"cache '{cache_root()}'. Either run the program with the cache directory of "
        f"the process that exported it (POLYKERNEL_CACHE_DIR, same polykernel, JAX, "
        f"Numba and compiler versions), or import/define the kernels first (call the "
        f"numba_kernel / load_cpp_* code once) so their targets are registered. "
        f"Kernels that cannot be cached (no content fingerprint, e.g. a closure over "
        f"an arbitrary object) always need that."
    )


def load_exported(blob: ExportedLike) -> Exported:
    """Deserialise an exported program and register the polykernel targets it calls.

    The documented way to run, in a new process, a ``jax.export`` artefact that
    uses polykernel kernels: ``jax.export.deserialize`` plus
    :func:`register_exported_targets`.

    Args:
        blob: The bytes of ``Exported.serialize()`` (or an ``Exported``).

    Returns:
        The ``jax.export.Exported``; call it with ``exported.call(*args)``.

    Raises:
        KernelNotAvailableError: a target is in no cache (see
            :func:`register_exported_targets`).

    Example:
        >>> import jax, jax.numpy as jnp, numba, polykernel as pk
        >>> @numba.njit
        ... def double(x, out):
        ...     for i in range(out.size):
        ...         out[i] = 2 * x[i]
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> exported = pk.export(jax.jit(pk.numba_kernel(double, spec)))(spec)
        >>> _ = open("f.jaxexport", "wb").write(exported.serialize())
        >>> exported = pk.load_exported(open("f.jaxexport", "rb").read())  # any process
        >>> exported.call(jnp.arange(4.0, dtype=jnp.float32)).tolist()
        [0.0, 2.0, 4.0, 6.0]
    """
    exported = _as_exported(blob)
    register_exported_targets(exported)
    return exported
