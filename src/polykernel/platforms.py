"""The three platform vocabularies, as named types, and the conversions between them.

Three naming schemes meet in polykernel, and each conversion between them lives here
(no other module keeps a table or converts inline):

- :class:`Platform` (ours, the public API's): where a kernel runs — ``cpu``, ``gpu``,
  ``tpu``. ``def_kernel``, ``set_default``, ``set_backend`` and the benchmark speak it.
- :class:`LoweringPlatform` (JAX's lowering and device platforms): ``cpu``, ``cuda``,
  ``rocm``, ``tpu``. Lowering rules are registered per lowering platform, and the native
  build path uses ``cpu``/``cuda`` to say which compiler and language a module needs.
- :class:`XlaPlatform` (XLA's FFI registration): ``cpu``, ``CUDA``, ``ROCM`` — what
  ``jax.ffi.register_ffi_target(..., platform=...)`` expects.

The classes are ``StrEnum``: a member *is* its string (``Platform.GPU == "gpu"``), so
values stay plain strings in messages, keys and JSON.

Example:
    >>> from polykernel.platforms import lowering_platforms, platform_of, xla_platform
    >>> lowering_platforms("gpu")
    (<LoweringPlatform.CUDA: 'cuda'>, <LoweringPlatform.ROCM: 'rocm'>)
    >>> platform_of("cuda"), xla_platform("gpu")
    (<Platform.GPU: 'gpu'>, <XlaPlatform.CUDA: 'CUDA'>)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, overload

__all__ = [
    "PLATFORMS",
    "LoweringPlatform",
    "Platform",
    "PlatformName",
    "XlaPlatform",
    "lowering_platforms",
    "platform_of",
    "xla_platform",
]


class Platform(StrEnum):
    """Where a kernel runs (our vocabulary, the public API's)."""

    CPU = "cpu"
    GPU = "gpu"
    TPU = "tpu"


class LoweringPlatform(StrEnum):
    """JAX's name of a lowering (and device) platform."""

    CPU = "cpu"
    CUDA = "cuda"
    ROCM = "rocm"
    TPU = "tpu"


class XlaPlatform(StrEnum):
    """The platform name XLA's FFI target registry files a handler under."""

    CPU = "cpu"
    CUDA = "CUDA"
    ROCM = "ROCM"


#: The public spelling of a :class:`Platform`, for type hints.
PlatformName = Literal["cpu", "gpu", "tpu"]

#: Every platform a kernel can be registered for, in the public API's order (as the
#: plain strings messages and JSON show).
PLATFORMS: tuple[PlatformName, ...] = ("cpu", "gpu", "tpu")

_LOWERINGS: dict[Platform, tuple[LoweringPlatform, ...]] = {
    Platform.CPU: (LoweringPlatform.CPU,),
    Platform.GPU: (LoweringPlatform.CUDA, LoweringPlatform.ROCM),
    Platform.TPU: (LoweringPlatform.TPU,),
}
# Every spelling a caller, JAX or XLA uses for a platform, lower-cased.
_OURS: dict[str, Platform] = {
    "cpu": Platform.CPU,
    "host": Platform.CPU,
    "gpu": Platform.GPU,
    "cuda": Platform.GPU,
    "rocm": Platform.GPU,
    "tpu": Platform.TPU,
}
_XLA: dict[str, XlaPlatform] = {
    "cpu": XlaPlatform.CPU,
    "host": XlaPlatform.CPU,
    "cuda": XlaPlatform.CUDA,
    "gpu": XlaPlatform.CUDA,
    "rocm": XlaPlatform.ROCM,
}


def lowering_platforms(platform: str) -> tuple[LoweringPlatform, ...]:
    """The JAX lowering platforms our ``platform`` covers (``gpu``: cuda and rocm).

    Raises:
        ValueError: ``platform`` is not one of :data:`PLATFORMS`.
    """
    return _LOWERINGS[Platform(platform)]


# The spellings each conversion always knows, for the checker's overloads below.
_KnownPlatform = Literal["cpu", "host", "gpu", "cuda", "rocm", "tpu"]
_KnownXla = Literal[
    "cpu", "host", "gpu", "cuda", "rocm",
    Platform.CPU, Platform.GPU,
    LoweringPlatform.CPU, LoweringPlatform.CUDA, LoweringPlatform.ROCM,
]  # fmt: skip


@overload
def platform_of(name: _KnownPlatform | Platform | LoweringPlatform) -> Platform: ...
@overload
def platform_of(name: str) -> Platform | None: ...
def platform_of(name: str) -> Platform | None:
    """Our platform for any spelling: ours, JAX's (``cuda``), XLA's (``CUDA``).

    Returns None for a name no vocabulary knows (a plugin's device, say).
    """
    return _OURS.get(name.lower()) if isinstance(name, str) else None


@overload
def xla_platform(name: _KnownXla | XlaPlatform) -> XlaPlatform: ...
@overload
def xla_platform(name: str) -> XlaPlatform | None: ...
def xla_platform(name: str) -> XlaPlatform | None:
    """XLA's registration name for any spelling (``gpu``/``cuda`` -> ``CUDA``).

    Returns None for a platform XLA's FFI registry does not file handlers under
    (``tpu``, or an unknown name).
    """
    return _XLA.get(name.lower()) if isinstance(name, str) else None
