"""The vocabulary of polykernel's public signatures, for type checkers.

Each name is a type alias or a protocol that the public API's annotations use (every
module has ``from __future__ import annotations``, so none of them costs anything at
run time):

- :data:`PlatformName`: where a kernel runs, ``"cpu"``, ``"gpu"`` or ``"tpu"``;
- :data:`VmapMethod`: how ``jax.vmap`` calls a kernel (``jax.ffi.ffi_call``'s words);
- :class:`ShapeDtypeLike` and :data:`Outs`: what ``outs`` takes, one object with a
  ``shape`` and a ``dtype`` (a ``jax.ShapeDtypeStruct``, or an array) or a list, tuple
  or dict of them (nested as a pytree);
- :data:`KernelGenerator`: what ``XLACustomKernel.def_kernel`` registers;
- :data:`LaunchDims`: a launch grid or block, an int or a list/tuple of ints;
- :data:`HalfPrecision`: how ``numba_kernel`` passes float16/bfloat16 buffers;
- :data:`ExportedLike`: a ``jax.export.Exported`` or the bytes of its ``serialize()``.

Backend names are open (``register_backend`` adds one), so they stay ``str``.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from polykernel.types import PlatformName, ShapeDtypeLike
    >>> def describe(platform: PlatformName, out: ShapeDtypeLike) -> str:
    ...     return f"{platform}: {tuple(out.shape)}"
    >>> describe("cpu", jax.ShapeDtypeStruct((3,), jnp.float32))
    'cpu: (3,)'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from .platforms import PlatformName

#: How ``jax.vmap`` calls a kernel (``jax.ffi.ffi_call``'s vocabulary).
VmapMethod = Literal[
    "sequential", "sequential_unrolled", "expand_dims", "broadcast_all"
]

if TYPE_CHECKING:
    from jax.export import Exported
    from numpy.typing import DTypeLike

__all__ = [
    "ExportedLike",
    "HalfPrecision",
    "KernelGenerator",
    "LaunchDims",
    "Outs",
    "PlatformName",
    "ShapeDtypeLike",
    "VmapMethod",
]


class ShapeDtypeLike(Protocol):
    """One output's description: anything with a ``shape`` and a ``dtype``
    (``jax.ShapeDtypeStruct``, a JAX or NumPy array)."""

    @property
    def shape(self) -> Sequence[int]: ...

    @property
    def dtype(self) -> DTypeLike: ...


#: ``outs``: one :class:`ShapeDtypeLike`, or a list, tuple or dict of them (a pytree).
Outs: TypeAlias = "ShapeDtypeLike | Sequence[Outs] | Mapping[Any, Outs]"

#: A kernel generator: called at lowering time with ``outs=`` (a tuple of
#: ``jax.ShapeDtypeStruct``), the call's keywords and, when it takes it, ``ins=``;
#: returns the JAX-traceable function of the inputs.
KernelGenerator: TypeAlias = Callable[..., Callable[..., Any]]

#: A launch grid or block (``grid``, ``block``, ``launch_dims``): an int or a list or
#: tuple of ints, one per axis.
LaunchDims: TypeAlias = int | tuple[int, ...] | list[int]

#: ``numba_kernel(half_precision=...)``: float32 copies, or the raw 16-bit patterns.
HalfPrecision: TypeAlias = Literal["float32", "bits"]

#: What ``load_exported`` and ``register_exported_targets`` read.
ExportedLike: TypeAlias = "Exported | bytes | bytearray | memoryview"
