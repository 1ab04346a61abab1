"""How a GPU kernel's parameters are laid out, packed and described to the launcher.

``cuLaunchKernel`` takes one pointer per kernel parameter. The launcher keeps every
parameter's bytes in one *template* (constants already in place: scalar arguments,
shapes and strides of Numba arrays, Triton's null scratch pointers) and, per call,
patches the buffers' device pointers into it. A :class:`LaunchSpec` is that
description plus what the launcher checks (each buffer's dtype and unbatched shape)
and the launch configuration; :meth:`LaunchSpec.encode` is the byte format
``launcher/csrc/gpu_launcher/spec.h`` parses, and :meth:`LaunchSpec.pack` is the
reference packer the native one is tested against.

Everything here is pure: no JAX, no CUDA, no disk.

Example:
    >>> from polykernel.launcher.layout import LaunchSpec, BufferSpec, pointer, constant
    >>> spec = LaunchSpec(
    ...     n_in=1,
    ...     buffers=(BufferSpec("float32", (4,)), BufferSpec("float32", (4,))),
    ...     params=(pointer(0), pointer(1), constant(4, "int32")),
    ...     grid=(1, 1, 1), block=(32, 1, 1))
    >>> spec.offsets()
    (0, 8, 16)
    >>> spec.pack([0x1000, 0x2000]).hex()
    '0010000000000000002000000000000004000000'
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..ffi import abi

__all__ = [
    "ABI_VERSION",
    "BufferSpec",
    "LaunchSpec",
    "Param",
    "constant",
    "pointer",
    "struct_param",
]

#: Version of the spec format and handler contract (``PKGPU_ABI_VERSION`` in C++).
ABI_VERSION = 1
_MAGIC = 0x314C4B50  # "PKL1"
_SIZES = (1, 2, 4, 8, 16)
MAX_PARAM_BYTES = 32768  # the driver's limit for kernel parameters (Volta and newer)


@dataclass(frozen=True)
class Param:
    """One kernel parameter: a constant (``value``) or a buffer's device pointer.

    Attributes:
        size: bytes the parameter occupies (1, 2, 4, 8 or 16).
        value: the constant's bytes (little-endian, ``len == size``), or None.
        buffer: for a pointer, the buffer it points to (inputs, then outputs).
        align: a pointer's required alignment in bytes (0: none); the launcher checks
            it on every launch (a kernel compiled for aligned pointers, e.g. Triton's
            ``tt.divisibility=16``, must never see an unaligned one).
    """

    size: int
    value: bytes | None = None
    buffer: int | None = None
    align: int = 0

    def __post_init__(self) -> None:
        struct_param = self.size > 16  # a C struct passed by value (see `struct_param`)
        if struct_param and self.size % 8:
            raise ValueError(
                f"a struct parameter's size is a multiple of 8, got {self.size}"
            )
        if not struct_param and self.size not in _SIZES:
            raise ValueError(
                f"parameter size must be one of {_SIZES} (or a multiple of 8 above "
                f"16 for a struct), got {self.size}"
            )
        if self.value is None and self.buffer is None:
            raise ValueError("a parameter is either a constant or a buffer pointer")
        if self.value is not None and self.buffer is not None and not struct_param:
            raise ValueError("a parameter is either a constant or a buffer pointer")
        if self.value is not None and len(self.value) != self.size:
            raise ValueError(
                f"constant of {len(self.value)} bytes for a {self.size}-byte parameter"
            )
        if self.buffer is not None and self.size != 8 and not struct_param:
            raise ValueError("a pointer parameter has 8 bytes")

    @property
    def layout_align(self) -> int:
        """Alignment of the parameter in the template (structs: 8)."""
        return 8 if self.size > 16 else self.size


def pointer(buffer: int, align: int = 0) -> Param:
    """The device pointer of buffer ``buffer`` (inputs first, then outputs)."""
    return Param(8, buffer=buffer, align=align)


def struct_param(value: bytes, buffer: int | None = None, align: int = 0) -> Param:
    """A C struct of more than 16 bytes passed by value (8-byte aligned), e.g. a Warp
    ``array_t``; with ``buffer``, that buffer's device pointer is patched into its
    first 8 bytes on every launch.

    Example:
        >>> from polykernel.launcher.layout import struct_param
        >>> struct_param(bytes(24), buffer=0).layout_align
        8
    """
    return Param(len(value), value=bytes(value), buffer=buffer, align=align)


def constant(value: object, dtype: str) -> Param:
    """A constant of NumPy ``dtype``; ``constant(0, "uint64")`` is a null pointer.

    Example:
        >>> from polykernel.launcher.layout import constant
        >>> constant(2.0, "float32").value.hex()
        '00000040'
    """
    data = np.asarray(value, dtype=np.dtype(dtype)).astype(
        np.dtype(dtype).newbyteorder("<")
    )
    return Param(data.itemsize, value=data.tobytes())


@dataclass(frozen=True)
class BufferSpec:
    """A buffer's dtype and shape as the kernel was compiled for (no vmap axes)."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def itemsize(self) -> int:
        return _dtype(self.dtype).itemsize

    @property
    def code(self) -> int:
        return abi.dtype_code(_dtype(self.dtype))


def _dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class LaunchSpec:
    """Everything the launcher needs besides the image: buffers, parameters, launch.

    Attributes:
        n_in: how many of ``buffers`` are inputs (the rest are outputs, at least one).
        buffers: the dtype and unbatched shape of every input, then every output.
        params: the kernel's parameters in order.
        grid, block: launch dimensions (a 0 anywhere launches nothing and the
            outputs are zero-filled, as the reference does for empty problems).
        shared_mem: dynamic shared memory in bytes.
    """

    n_in: int
    buffers: tuple[BufferSpec, ...]
    params: tuple[Param, ...]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_mem: int = 0

    def __post_init__(self) -> None:
        n = len(self.buffers)
        if not 0 <= self.n_in < n:
            raise ValueError(
                f"need at least one output (n_in={self.n_in}, {n} buffers)"
            )
        for p in self.params:
            if p.buffer is not None and not 0 <= p.buffer < n:
                raise ValueError(f"pointer to buffer {p.buffer}, but there are {n}")
        if len(self.grid) != 3 or len(self.block) != 3:
            raise ValueError("grid and block have three entries each")
        if self.template_size() > MAX_PARAM_BYTES:
            raise ValueError(
                f"the kernel's parameters take {self.template_size()} bytes, more than "
                f"the {MAX_PARAM_BYTES} a CUDA launch allows"
            )

    def offsets(self) -> tuple[int, ...]:
        """Byte offset of each parameter in the template (naturally aligned)."""
        out, at = [], 0
        for p in self.params:
            at = (at + p.layout_align - 1) // p.layout_align * p.layout_align
            out.append(at)
            at += p.size
        return tuple(out)

    def template_size(self) -> int:
        offsets = self.offsets()
        return offsets[-1] + self.params[-1].size if self.params else 0

    def template(self) -> bytes:
        """The parameter bytes with every pointer still zero."""
        blob = bytearray(self.template_size())
        for p, off in zip(self.params, self.offsets(), strict=True):
            if p.value is not None:
                blob[off : off + p.size] = p.value
        return bytes(blob)

    def pack(self, pointers: Sequence[int]) -> bytes:
        """The parameter bytes of one launch, given one device pointer per buffer.

        This is the reference the native packer is tested against.
        """
        if len(pointers) != len(self.buffers):
            raise ValueError(
                f"{len(pointers)} pointers for {len(self.buffers)} buffers"
            )
        blob = bytearray(self.template())
        for p, off in zip(self.params, self.offsets(), strict=True):
            if p.buffer is not None:
                ptr = int(pointers[p.buffer])
                if p.align > 1 and ptr % p.align:
                    raise ValueError(
                        f"buffer {p.buffer} at {ptr:#x} is not {p.align}-byte aligned"
                    )
                blob[off : off + 8] = struct.pack("<Q", ptr)
        return bytes(blob)

    def encode(self) -> bytes:
        """The spec in the launcher's byte format (little-endian 64-bit words)."""
        words: list[int] = [
            _MAGIC,
            ABI_VERSION,
            self.n_in,
            len(self.buffers) - self.n_in,
        ]
        for b in self.buffers:
            words += [b.code, b.itemsize, len(b.shape), *b.shape]
        words += [*self.grid, *self.block, self.shared_mem, len(self.params)]
        words.append(self.template_size())
        for p, off in zip(self.params, self.offsets(), strict=True):
            words += [off, p.size]
        head = struct.pack(f"<{len(words)}q", *words)
        template = self.template()
        template += bytes(-len(template) % 8)
        patches = [(i, p.buffer, p.align) for i, p in enumerate(self.params)
                   if p.buffer is not None]  # fmt: skip
        tail = [len(patches)] + [x for patch in patches for x in patch]
        return head + template + struct.pack(f"<{len(tail)}q", *tail)
