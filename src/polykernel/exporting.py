"""``jax.export`` for programs that call polykernel kernels, across processes.

A serialised ``jax.export`` artefact names each kernel by its FFI target, and a
process that runs it must have every target registered first. polykernel's target
names are content-derived (no counters, no addresses), so the name alone finds the
compiled handler in the persistent cache:

- ``pk_numba_<24 hex>`` (``numba_kernel``): the Numba handler object, keyed by the
  target name (``backends/_numba_cache.py``);
- ``<module>.<function>.pk<16 hex>`` (``load_cpp_*`` / ``load_cuda_*``): the
  compiled library whose cache key starts with those digits (``native/revive.py``).

So a new process needs neither the kernels' Python code nor their sources, only the
same cache directory (``POLYKERNEL_CACHE_DIR``) and the same software versions::

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
from typing import Any

from .errors import (
    KernelNotAvailableError,
    KernelRegistrationError,
    KernelTypeError,
    PolykernelWarning,
)

__all__ = ["export", "exported_targets", "load_exported", "register_exported_targets"]

_CUSTOM_CALL = re.compile(r'stablehlo\.custom_call\s+@(?:"([^"]+)"|([\w.$-]+))')
_NUMBA_TARGET = re.compile(r"^pk_numba_[0-9a-f]{24}$")


def export(
    fun: Callable[..., Any],
    *,
    platforms: Sequence[str] | None = None,
    disabled_checks: Sequence[Any] = (),
) -> Callable[..., Any]:
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
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> exported = export(jax.jit(jnp.sin))(spec)
        >>> exported.platforms
        ('cpu',)
    """
    import jax

    jitted = fun if hasattr(fun, "lower") else jax.jit(fun)
    extra = list(disabled_checks)

    def do_export(*args: Any, **kwargs: Any) -> Any:
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


def _keep_checks_used(exported: Any, known: frozenset[str], extra: list) -> Any:
    """The artefact records its disabled checks: keep only the targets it calls,
    sorted, so it depends on neither set order nor what else the process built."""
    import dataclasses

    import jax

    used = [t for t in exported_targets(exported) if t in known]
    _warn_unportable(used)
    checks = (*extra, *(jax.export.DisabledSafetyCheck.custom_call(t) for t in used))
    return dataclasses.replace(exported, disabled_safety_checks=checks)


def _warn_unportable(targets: list[str]) -> None:
    """Warn about Numba handlers another process cannot load from the cache."""
    import sys
    import warnings

    if "polykernel.backends._numba_build" not in sys.modules:
        return  # no Numba kernel was built in this process
    from .backends._numba_build import loaded_handler

    for target in targets:
        handler = loaded_handler(target)
        if handler is None or handler.origin != "uncached":
            continue
        if handler.process_local:
            why = (
                "has no content fingerprint (it reaches an object polykernel cannot "
                "hash, e.g. a numba.cfunc object), so its target name is valid in this "
                "process only: the artefact cannot run in another process"
            )
        else:
            why = (
                "is not in the disk cache (its code depends on this process; the "
                "reason is logged at DEBUG by polykernel.backends._numba_build): "
                "another process must define the kernel before load_exported"
            )
        warnings.warn(
            f"polykernel.export: Numba kernel '{handler.label}' (FFI target "
            f"'{target}') {why}.",
            PolykernelWarning,
            stacklevel=4,
        )


def _polykernel_targets() -> frozenset[str]:
    from .native.runtime import list_registered_targets

    return frozenset(list_registered_targets())


def _as_exported(exported: Any, caller: str = "load_exported") -> Any:
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


def exported_targets(exported: Any) -> list[str]:
    """Sorted names of every custom-call target an exported program calls.

    Args:
        exported: A ``jax.export.Exported`` or the bytes of its ``serialize()``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> exported_targets(jax.export.export(jax.jit(jnp.sin))(spec))
        []
    """
    text = _as_exported(exported, "exported_targets").mlir_module()
    return sorted({a or b for a, b in _CUSTOM_CALL.findall(text)})


def register_exported_targets(exported: Any) -> list[str]:
    """Register every polykernel target ``exported`` calls, from the caches.

    The kernels' Python code and sources are not needed: each target is found by
    its content-derived name in ``polykernel.get_cache_dir()``. Targets already
    registered in this process are kept; other custom calls (JAX's own, or your
    hand-registered ones) are left alone.

    Args:
        exported: A ``jax.export.Exported`` or the bytes of its ``serialize()``.

    Returns:
        The polykernel targets the program calls, sorted.

    Raises:
        KernelNotAvailableError: (an ``ImportError``) a target is in no cache.
        KernelRegistrationError: a parallel Numba handler would need a thread-safe
            threading layer this process does not have.
        KernelTypeError: ``exported`` is neither bytes nor an ``Exported``.

    Example:
        >>> blob = pk.export(jax.jit(f))(spec).serialize()   # doctest: +SKIP
        >>> pk.register_exported_targets(blob)               # in another process
        ['pk_numba_0c1d...']                                 # doctest: +SKIP
    """
    from .native.revive import TARGET_PATTERN, load_cached_target

    exported = _as_exported(exported, "register_exported_targets")
    names = [
        t
        for t in exported_targets(exported)
        if _NUMBA_TARGET.match(t) or TARGET_PATTERN.match(t)
    ]
    missing, present = [], _polykernel_targets()
    for name in names:
        if name in present:
            continue
        if _NUMBA_TARGET.match(name):
            found = _load_numba_target(name)
        else:
            found = load_cached_target(name) is not None
        if not found:
            missing.append(name)
    if missing:
        raise _missing_error(missing)
    return names


def _load_numba_target(name: str) -> bool:
    from .backends._numba_build import load_cached_handler

    try:
        return load_cached_handler(name) is not None
    except KernelRegistrationError as err:
        raise KernelRegistrationError(
            f"polykernel.load_exported: cannot register FFI target '{name}': {err}"
        ) from err


def _missing_error(missing: list[str]) -> KernelNotAvailableError:
    from .config import cache_root

    return KernelNotAvailableError(
        f"polykernel.load_exported: the exported program calls FFI target(s) "
        f"{', '.join(repr(m) for m in missing)}, found neither registered in this "
        f"process nor loadable from the cache '{cache_root()}'. Either run the "
        f"program with the cache directory of the process that exported it "
        f"(POLYKERNEL_CACHE_DIR, "
        f"same polykernel, JAX, Numba and compiler versions), or import/define the "
        f"kernels first (call the numba_kernel / load_cpp_* code once) so their "
        f"targets are registered. Kernels that cannot be cached (no content "
        f"fingerprint, e.g. a closure over an arbitrary object) always need that."
    )


def load_exported(blob: Any) -> Any:
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
        >>> exported = pk.load_exported(open("f.jaxexport", "rb").read())
        ...                                                   # doctest: +SKIP
        >>> y = exported.call(x)                              # doctest: +SKIP
    """
    exported = _as_exported(blob)
    register_exported_targets(exported)
    return exported
