"""Numba's array ABI as launch parameters for the native launcher (pure).

A ``@cuda.jit`` kernel compiled for ``Array(dtype, ndim, "C")`` arguments takes
each array as ``5 + 2 * ndim`` parameters, in this order (``numba.cuda``'s own
launcher passes the same ones):

========  ===========  =====================================================
meminfo   pointer      NRT meminfo, null for arrays that Numba does not own
parent    pointer      owning Python object, null on the device
nitems    intp         number of elements
itemsize  intp         bytes per element
data      pointer      the buffer: the only value patched per call
shape     intp x ndim  extents
strides   intp x ndim  byte strides (C order)
========  ===========  =====================================================

XLA's buffers are dense and row-major, so everything but ``data`` is known when
the kernel is compiled and goes into the launcher's constant template; under
``jax.vmap`` the launcher offsets ``data`` per batch element and the shape stays
the compiled one. A scalar parameter after the arrays is one parameter of its own
width (a bool one byte, as NVVM's ``.u8``), its value baked into the template.

Example:
    >>> from polykernel.backends.numba_cuda.array_abi import array_params, c_strides
    >>> [p.buffer for p in array_params(3, (2, 4), 4)][:5]
    [None, None, None, None, 3]
    >>> c_strides((2, 4), 4)
    (16, 4)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...launcher.layout import BufferSpec, LaunchSpec, Param, constant, pointer

__all__ = [
    "array_params",
    "c_strides",
    "kernel_launch_spec",
    "params_per_array",
    "scalar_param",
]


def c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a C-contiguous array of ``shape``."""
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(strides))


def params_per_array(ndim: int) -> int:
    """How many kernel parameters one array of rank ``ndim`` takes."""
    return 5 + 2 * ndim


def array_params(buffer: int, shape: Sequence[int], itemsize: int) -> tuple[Param, ...]:
    """The parameters of one array argument; ``buffer`` indexes inputs then outputs."""
    intp = "int64"
    null = constant(0, "uint64")
    return (
        null,  # meminfo
        null,  # parent
        constant(math.prod(shape), intp),
        constant(itemsize, intp),
        pointer(buffer),
        *(constant(int(d), intp) for d in shape),
        *(constant(s, intp) for s in c_strides(shape, itemsize)),
    )


def scalar_param(value: Any) -> Param:
    """A scalar argument (a NumPy scalar) by value: its own width, bool as a byte.

    Example:
        >>> import numpy as np
        >>> from polykernel.backends.numba_cuda.array_abi import scalar_param
        >>> scalar_param(np.bool_(True)).value, scalar_param(np.float64(1)).size
        (b'\\x01', 8)
    """
    if value.dtype.kind == "b":
        return constant(int(value), "uint8")
    return constant(value, value.dtype.name)


def kernel_launch_spec(
    buffers: Sequence[BufferSpec],
    n_in: int,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared_mem: int = 0,
    scalars: Sequence[Any] = (),
) -> LaunchSpec:
    """The launch spec of a kernel taking every input, then every output, as arrays,
    then ``scalars`` (NumPy scalars, in parameter order) by value.

    Example:
        >>> from polykernel.backends.numba_cuda.array_abi import (
        ...     BufferSpec, kernel_launch_spec,
        ... )
        >>> f32 = BufferSpec("float32", (8,))
        >>> spec = kernel_launch_spec([f32, f32], 1, (1, 1, 1), (8, 1, 1))
        >>> len(spec.params), spec.template_size()
        (14, 112)
    """
    params: list[Param] = []
    for i, b in enumerate(buffers):
        params += array_params(i, b.shape, b.itemsize)
    params += [scalar_param(v) for v in scalars]
    return LaunchSpec(
        n_in=n_in,
        buffers=tuple(buffers),
        params=tuple(params),
        grid=grid,
        block=block,
        shared_mem=shared_mem,
    )
