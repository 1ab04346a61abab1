"""How a Warp kernel's parameters map onto an FFI call, and their C layout.

A Warp kernel's parameters are filled two ways: a parameter whose name is one of
the call's keywords gets that scalar attribute; every other parameter, in order,
gets the next buffer (the inputs, then the outputs). Warp passes arrays as
``wp::array_t<T>`` (``warp/native/array.h``) and the launch grid as
``wp::launch_bounds_t<N>`` (``warp/native/builtin.h``)::

    array_t<T>         { T* data; T* grad; int shape[4]; int strides[4];
                         uint16 ndim; uint16 flags; }            // 56 bytes
    launch_bounds_t<N> { uint32 shape[N]; size_t size; size_t coord_mult; }

On CPU the entry point is ``void <name>_cpu_forward(launch_bounds_t<N>*,
wp_args_<name>*)`` with ``wp_args_<name>`` a C struct of the parameters in
order; on CUDA each parameter is passed by value after the launch bounds.
``tests/backends/warp/test_abi.py`` checks these numbers against Warp's own ctypes
mirrors. Nothing here imports Warp: :func:`describe_kernel` reads its kernel
object duck-typed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import KernelTypeError

__all__ = [
    "ARRAY_T_SIZE",
    "MAX_ARRAY_BYTES",
    "ArgPlan",
    "KernelPlan",
    "array_bytes",
    "bounds_bytes",
    "bounds_layout",
    "describe_kernel",
]

ARRAY_T_SIZE = 56
ARRAY_SHAPE, ARRAY_STRIDES, ARRAY_NDIM = 16, 32, 48
MAX_ARRAY_BYTES = 2**31 - 1  # Warp's strides are 32-bit byte counts
_SCALAR_SIZES = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8,
}  # fmt: skip
_PY_SCALARS = {float: "float32", int: "int32", bool: "bool"}


@dataclass(frozen=True)
class ArgPlan:
    """One kernel parameter: an array fed by a buffer, or a scalar attribute."""

    label: str
    kind: str  # "array" or "scalar"
    dtype: str  # NumPy dtype name
    ndim: int  # Warp array rank (0 for scalars)
    offset: int  # byte offset in the CPU args struct
    size: int


@dataclass(frozen=True)
class KernelPlan:
    """The parameters of a Warp kernel in order and its launch rank."""

    key: str
    args: tuple[ArgPlan, ...]
    launch_ndim: int = 1  # rank of wp.tid(); known once Warp has built the kernel

    @property
    def arrays(self) -> tuple[ArgPlan, ...]:
        return tuple(a for a in self.args if a.kind == "array")

    @property
    def scalars(self) -> tuple[ArgPlan, ...]:
        return tuple(a for a in self.args if a.kind == "scalar")

    @property
    def struct_size(self) -> int:
        """Size of the CPU args struct (C layout: natural alignment, padded to 8)."""
        end = max((a.offset + a.size for a in self.args), default=0)
        return (end + 7) // 8 * 8


def _scalar_dtype(key: str, label: str, t: Any) -> str:
    if t in _PY_SCALARS:
        return _PY_SCALARS[t]
    name = getattr(t, "__name__", "")
    if name in _SCALAR_SIZES and hasattr(t, "_type_"):
        return name
    raise KernelTypeError(
        f"warp_kernel '{key}': parameter '{label}' has type {t!r}; polykernel passes "
        f"Warp arrays (wp.array of bool, int8..uint64, float16/32/64) and scalars of "
        f"those dtypes. Pass vectors/structs as arrays of scalars."
    )


def _is_plain_array(t: Any) -> bool:
    """``wp.array(dtype=..., ndim=...)`` or its typed form ``wp.array[dtype]`` /
    ``wp.array2d[dtype]`` (an annotation object whose concrete class is ``array``);
    never an indexed or fabric array."""
    cls = getattr(t, "_concrete_cls", type(t))
    return getattr(cls, "__name__", "") == "array" and hasattr(t, "ndim")


def describe_kernel(kernel: Any) -> KernelPlan:
    """The :class:`KernelPlan` of a ``@wp.kernel`` (duck-typed: ``key``,
    ``adj.args`` with ``label``/``type``, ``adj.kernel_dim``).

    Raises:
        KernelTypeError: a parameter is neither a plain Warp array nor a scalar,
            or the kernel is generic (``typing.Any`` annotations).
    """
    key = getattr(kernel, "key", repr(kernel))
    if getattr(kernel, "is_generic", False):
        raise KernelTypeError(
            f"warp_kernel '{key}': the kernel is generic (an annotation is "
            f"typing.Any); annotate every parameter with a concrete type, e.g. "
            f"pk.jaxinfo_to_warpinfo(outs[0])."
        )
    args, offset = [], 0
    for var in kernel.adj.args:
        t = var.type
        if _is_plain_array(t):
            dtype_name = getattr(t.dtype, "__name__", repr(t.dtype))
            if dtype_name not in _SCALAR_SIZES:
                raise KernelTypeError(
                    f"warp_kernel '{key}': array parameter '{var.label}' has dtype "
                    f"{dtype_name}; polykernel passes arrays of scalars (bool, "
                    f"int8..uint64, float16/32/64). Flatten vector dtypes."
                )
            kind, dtype, ndim, size, align = "array", dtype_name, t.ndim, 56, 8
        else:
            dtype = _scalar_dtype(key, var.label, t)
            kind, ndim = "scalar", 0
            size = align = _SCALAR_SIZES[dtype]
        offset = (offset + align - 1) // align * align
        args.append(ArgPlan(var.label, kind, dtype, ndim, offset, size))
        offset += size
    return KernelPlan(key, tuple(args))


def bounds_layout(ndim: int) -> tuple[int, int, int]:
    """``(offset of size, offset of coord_mult, struct size)`` of
    ``launch_bounds_t<ndim>``."""
    size_at = (4 * ndim + 7) // 8 * 8
    return size_at, size_at + 8, size_at + 16


def fold_launch(dims: Sequence[int], ndim: int) -> tuple[tuple[int, ...], int, int]:
    """Warp's rule: pad ``dims`` with 1 to ``ndim``; fold extra trailing dims into
    ``coord_mult``. Returns ``(shape, size, coord_mult)``."""
    padded = tuple(dims) + (1,) * max(0, ndim - len(dims))
    kept, extras = padded[:ndim], padded[ndim:]
    mult = int(np.prod(extras, dtype=np.int64)) if extras else 1
    return kept, int(np.prod(kept, dtype=np.int64)) * mult, mult


def bounds_bytes(dims: Sequence[int], ndim: int) -> bytes:
    """The bytes of ``launch_bounds_t<ndim>`` for launch dims ``dims``."""
    shape, size, mult = fold_launch(dims, ndim)
    size_at, _, total = bounds_layout(ndim)
    blob = bytearray(total)
    struct.pack_into(f"<{ndim}I", blob, 0, *shape)
    struct.pack_into("<QQ", blob, size_at, size, mult)
    return bytes(blob)


def array_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """The shape Warp sees for a buffer (a 0-d buffer is a 1-element 1-d array)."""
    return tuple(shape) or (1,)


def array_bytes(shape: Sequence[int], itemsize: int, data: int = 0) -> bytes:
    """The bytes of ``array_t`` over a C-contiguous buffer at ``data``."""
    shape = array_shape(shape)
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.insert(0, step)
        step *= d
    pad = (0,) * (4 - len(shape))
    return struct.pack(
        "<QQ4i4iHH4x", data, 0, *shape, *pad, *strides, *pad, len(shape), 0
    )
