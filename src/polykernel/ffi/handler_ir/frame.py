"""LLVM IR that reads an ``XLA_FFI_CallFrame`` (offsets from :mod:`..abi`).

Everything is a load at ``base + offset``: no struct types are declared, so the IR
depends only on the numbers in ``abi`` (which the tests check against the
installed jaxlib headers).
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from .. import abi
from .builder import Builder

__all__ = [
    "I8", "I32", "I64", "PTR", "Buffer", "FrameReader", "const", "dim",
    "entry_alloca", "load",
]  # fmt: skip

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = I8.as_pointer()


def const(value: int, ty: ir.IntType = I64) -> ir.Constant:
    return ir.Constant(ty, value)


def address(builder: Builder, base: ir.Value, offset: int | ir.Value) -> ir.Value:
    """``(i8*)base + offset`` (``offset`` in bytes)."""
    off = offset if isinstance(offset, ir.Value) else const(offset)
    return builder.gep(builder.bitcast(base, PTR), [off], inbounds=True)


def entry_alloca(builder: Builder, ty: ir.Type) -> ir.Value:
    """Stack slot in the function's entry block (so a loop never grows the stack,
    and LLVM can promote it to a register)."""
    entry = builder.function.entry_basic_block
    with builder.goto_block(entry):
        first = entry.instructions[0] if entry.instructions else None
        if first is not None:
            builder.position_before(first)
        return builder.alloca(ty)


def load(
    builder: Builder, base: ir.Value, offset: int, ty: ir.Type
) -> ir.Instruction:
    """Load a ``ty`` stored at ``base + offset``."""
    return builder.load(
        builder.bitcast(address(builder, base, offset), ty.as_pointer())
    )


@dataclass
class Buffer:
    """One ``XLA_FFI_Buffer`` of the frame and what the handler derives from it."""

    role: str  # "input" or "output"
    index: int
    dtype: str  # the dtype the handler was built for
    rank: int  # the rank it was built for (without batch dims)
    ptr: ir.Value  # XLA_FFI_Buffer*
    code: ir.Value  # i32 dtype code in the frame
    frame_rank: ir.Value  # i64
    dims: ir.Value  # i64* to all dims (batch dims first)
    data: ir.Value  # i8*
    # Set once the frame is checked (``handler._core_dims``):
    core_dims: list[ir.Value] | None = None  # the trailing `rank` dims, i64
    count: ir.Value | None = None  # elements per batch element, i64


class FrameReader:
    """Emits loads of the frame's fields at the builder's position."""

    def __init__(self, builder: Builder, frame: ir.Value) -> None:
        self.b = builder
        self.frame = frame

    def extension(self) -> ir.Value:
        """``frame->extension_start`` (XLA's metadata query sets it)."""
        return load(self.b, self.frame, abi.FRAME_EXTENSION, PTR)

    def is_metadata(self, ext: ir.Value) -> ir.Value:
        """i1: the (non-null) extension ``ext`` is the metadata query."""
        kind = load(self.b, ext, abi.EXT_TYPE, I32)
        return self.b.icmp_signed("==", kind, const(abi.EXT_TYPE_METADATA, I32))

    def answer_metadata(self, ext: ir.Value, traits: int = 0) -> None:
        """Store the API version (and ``traits``) XLA asked for."""
        b = self.b
        meta = load(b, ext, abi.METADATA_EXT_METADATA, PTR)
        for offset, value in (
            (abi.METADATA_MAJOR, abi.API_MAJOR),
            (abi.METADATA_MINOR, abi.API_MINOR),
            (abi.METADATA_TRAITS, traits),
        ):
            slot = b.bitcast(address(b, meta, offset), I32.as_pointer())
            b.store(const(value, I32), slot)

    def stage(self) -> ir.Value:
        return load(self.b, self.frame, abi.FRAME_STAGE, I32)

    def api(self) -> ir.Value:
        return load(self.b, self.frame, abi.FRAME_API, PTR)

    def counts(self) -> tuple[ir.Value, ir.Value, ir.Value]:
        """Numbers of arguments, results and attributes (i64 each)."""
        b, frame = self.b, self.frame
        return (
            load(b, frame, abi.FRAME_ARGS_SIZE, I64),
            load(b, frame, abi.FRAME_RETS_SIZE, I64),
            load(b, frame, abi.FRAME_ATTRS_SIZE, I64),
        )

    def buffer(self, role: str, index: int, dtype: str, rank: int) -> Buffer:
        """The header fields of argument/result ``index``."""
        b = self.b
        table = load(
            b, self.frame, abi.FRAME_ARGS if role == "input" else abi.FRAME_RETS, PTR
        )
        ptr = load(b, table, 8 * index, PTR)
        return Buffer(
            role,
            index,
            dtype,
            rank,
            ptr,
            code=load(b, ptr, abi.BUFFER_DTYPE, I32),
            frame_rank=load(b, ptr, abi.BUFFER_RANK, I64),
            dims=b.bitcast(load(b, ptr, abi.BUFFER_DIMS, PTR), I64.as_pointer()),
            data=load(b, ptr, abi.BUFFER_DATA, PTR),
        )

    def attribute(self, index: int) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
        """``(type tag i32, name ptr, name length i64, XLA_FFI_Scalar*)``."""
        b = self.b
        types = load(b, self.frame, abi.FRAME_ATTR_TYPES, PTR)
        names = load(b, self.frame, abi.FRAME_ATTR_NAMES, PTR)
        values = load(b, self.frame, abi.FRAME_ATTRS, PTR)
        tag = load(b, types, 4 * index, I32)
        span = load(b, names, 8 * index, PTR)
        name_ptr = load(b, span, abi.BYTESPAN_PTR, PTR)
        name_len = load(b, span, abi.BYTESPAN_LEN, I64)
        return tag, name_ptr, name_len, load(b, values, 8 * index, PTR)


def dim(builder: Builder, dims: ir.Value, index: ir.Value | int) -> ir.Value:
    """``dims[index]`` of an ``i64*``."""
    idx = index if isinstance(index, ir.Value) else const(index)
    return builder.load(builder.gep(dims, [idx], inbounds=True))
