"""Validation of a call frame against a :class:`Signature`, as LLVM IR.

Each failed check branches to one error block with ``(kind, a, b, c)``, the
numbers :func:`polykernel.ffi._pyerror.handler_error` turns into a message, so
the first mismatch is reported and the success path is a chain of compares.

Kinds: 0 arity; 1/2 an input/output of the wrong dtype or too small a rank; 3 an
attribute of the wrong type or dtype; 4 an input's batch dim that does not
broadcast; 5 an input with another number of batch dims than the outputs; 6 an
attribute with another name; 7 no memory for float32 copies; 8 outputs with
different batch dims.
"""

from __future__ import annotations

from llvmlite import ir

from .. import abi
from .builder import Builder
from .frame import I8, I32, I64, Buffer, FrameReader, const, dim, load

__all__ = ["Checker"]


class Checker:
    """Collects failing branches into one error block (phi nodes per number)."""

    def __init__(self, builder: Builder, error_block: ir.Block) -> None:
        self.b = builder
        self.error_block = error_block
        with builder.goto_block(error_block):
            self.phis = [builder.phi(I64, name=n) for n in ("kind", "a", "b", "c")]

    def fail_if(self, cond: ir.Value, kind: int, a, b, c) -> None:
        """Branch to the error block with these numbers when ``cond`` holds."""
        builder = self.b
        values = [_i64(builder, v) for v in (kind, a, b, c)]  # before the branch
        ok = builder.append_basic_block("ok")
        branch = builder.cbranch(cond, self.error_block, ok)
        branch.set_weights([1, 1000])  # failing is unlikely
        for phi, value in zip(self.phis, values, strict=True):
            phi.add_incoming(value, builder.block)
        builder.position_at_end(ok)

    def counts(self, frame: FrameReader, nin: int, nout: int, nattr: int) -> None:
        got = frame.counts()
        bad: ir.Value | None = None
        for value, want in zip(got, (nin, nout, nattr), strict=True):
            ne = self.b.icmp_signed("!=", value, const(want))
            bad = ne if bad is None else self.b.or_(bad, ne)
        assert bad is not None  # three counts were compared
        self.fail_if(bad, 0, *got)

    def header(self, buf: Buffer) -> None:
        """dtype code equal, rank at least the built rank."""
        b = self.b
        want = const(abi.DTYPE_CODES[buf.dtype], I32)
        bad = b.or_(
            b.icmp_signed("!=", buf.code, want),
            b.icmp_signed("<", buf.frame_rank, const(buf.rank)),
        )
        kind = 1 if buf.role == "input" else 2
        self.fail_if(bad, kind, buf.index, b.sext(buf.code, I64), buf.frame_rank)

    def same_batch_rank(self, buf: Buffer, nbatch: ir.Value) -> None:
        b = self.b
        extra = b.sub(buf.frame_rank, const(buf.rank))
        bad = b.icmp_signed("!=", extra, nbatch)
        if buf.role == "input":
            self.fail_if(bad, 5, buf.index, extra, nbatch)
        else:
            self.fail_if(bad, 2, buf.index, b.sext(buf.code, I64), buf.frame_rank)

    def attribute(
        self, frame: FrameReader, index: int, name: str, dtype: str
    ) -> ir.Value:
        """Type tag, dtype and name of attribute ``index``; returns its value ptr."""
        b = self.b
        tag, name_ptr, name_len, scalar = frame.attribute(index)
        code = load(b, scalar, abi.SCALAR_DTYPE, I32)
        bad = b.or_(
            b.icmp_signed("!=", tag, const(abi.ATTR_TYPE_SCALAR, I32)),
            b.icmp_signed("!=", code, const(abi.DTYPE_CODES[dtype], I32)),
        )
        self.fail_if(bad, 3, index, b.sext(tag, I64), b.sext(code, I64))
        self.fail_if(
            _name_differs(b, name_ptr, name_len, name),
            6,
            index,
            b.ptrtoint(name_ptr, I64),
            name_len,
        )
        return load(b, scalar, abi.SCALAR_VALUE, I8.as_pointer())

    def batch_dims(self, buf: Buffer, nbatch: ir.Value, out_dims: ir.Value) -> None:
        """Each of ``buf``'s batch dims is 1 (inputs only) or equals the outputs'."""
        from .half import counted_loop

        def body(b: Builder, j: ir.Value) -> None:
            d, od = dim(b, buf.dims, j), dim(b, out_dims, j)
            bad = b.icmp_signed("!=", d, od)
            if buf.role == "input":
                bad = b.and_(bad, b.icmp_signed("!=", d, const(1)))
                self.fail_if(bad, 4, buf.index, j, d)
            else:
                self.fail_if(bad, 8, buf.index, j, d)

        counted_loop(self.b, nbatch, body)


def _i64(builder: Builder, value) -> ir.Value:
    if isinstance(value, int):
        return const(value)
    if value.type == I64:
        return value
    return builder.sext(value, I64)


def _name_differs(b: Builder, ptr: ir.Value, length: ir.Value, name: str):
    """i1: the byte span ``(ptr, length)`` is not ``name`` (bytes compared only
    when the lengths match, so a shorter name is never read past its end)."""
    raw = name.encode()
    differs = b.icmp_signed("!=", length, const(len(raw)))
    if not raw:
        return differs
    entry = b.block
    compare = b.append_basic_block("name.compare")
    done = b.append_basic_block("name.done")
    b.cbranch(differs, done, compare)
    b.position_at_end(compare)
    acc = ir.Constant(ir.IntType(1), 0)
    for i, byte in enumerate(raw):
        got = b.load(b.gep(ptr, [const(i)], inbounds=True))
        acc = b.or_(acc, b.icmp_unsigned("!=", got, ir.Constant(I8, byte)))
    b.branch(done)
    compared = b.block
    b.position_at_end(done)
    result = b.phi(ir.IntType(1))
    result.add_incoming(ir.Constant(ir.IntType(1), 1), entry)
    result.add_incoming(acc, compared)
    return result
