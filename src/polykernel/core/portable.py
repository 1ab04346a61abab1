"""A program every supported JAX line reads: StableHLO written for the oldest one.

``jax.export`` serialises a program as a StableHLO portable artefact of the version
its own jaxlib calls four weeks old: JAX 0.11 and 0.12 write 1.18.0, which JAX 0.10
(its newest: 1.17.0) cannot read. A bundle is meant to move between machines and
JAX lines, so :func:`for_every_line` writes its program again for the version the
oldest line in our range reads, when the program uses nothing newer (StableHLO's
serialiser refuses otherwise: the program is then kept as JAX wrote it, and an
older JAX refuses it at load, by name).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

__all__ = ["OLDEST_LINE_STABLEHLO", "for_every_line", "stablehlo_target"]

log = logging.getLogger(__name__)

#: The newest StableHLO version the oldest supported JAX line (jaxlib 0.10) reads.
OLDEST_LINE_STABLEHLO = "1.17.0"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in str(text).split("."))


def stablehlo_target() -> str:
    """The version a bundle's program is written for: JAX's own choice, or the
    oldest line's newest when JAX's is newer than that."""
    from jax._src.lib.mlir.dialects import hlo

    requirement = hlo.StablehloCompatibilityRequirement.WEEK_4  # what JAX uses
    jax_choice = str(hlo.get_version_from_compatibility_requirement(requirement))
    return min(jax_choice, OLDEST_LINE_STABLEHLO, key=_version)


def for_every_line(exported: Any) -> Any:
    """``exported`` with its program serialised for :func:`stablehlo_target` (the
    same object when that is already its version, or the program uses StableHLO
    the target does not have).

    Example:
        >>> import re, jax, jax.numpy as jnp
        >>> from polykernel.core.portable import for_every_line, stablehlo_target
        >>> spec = jax.ShapeDtypeStruct((4,), jnp.float32)
        >>> exported = for_every_line(jax.export.export(jax.jit(jnp.sin))(spec))
        >>> blob = bytes(exported.mlir_module_serialized)
        >>> re.search(rb"StableHLO_v([0-9.]+)", blob)[1].decode() == stablehlo_target()
        True
    """
    from jax._src import xla_bridge
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]
    from jax._src.lib.mlir import ir  # pyright: ignore[reportPrivateImportUsage]

    target = stablehlo_target()
    if f"StableHLO_v{target}".encode() in bytes(exported.mlir_module_serialized):
        return exported
    try:
        with mlir.make_ir_context():
            module = ir.Module.parse(exported.mlir_module())
            sdy = bool(getattr(xla_bridge.get_backend(), "serialize_with_sdy", False))
            data = _jax.mlir.serialize_portable_artifact(module, target, sdy)
    except Exception as err:  # it uses StableHLO newer than the target: as JAX wrote
        log.info("bundle: the program stays as JAX serialised it: %s", err)
        return exported
    return dataclasses.replace(exported, mlir_module_serialized=data)
