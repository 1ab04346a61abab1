"""Batch dimensions (``vmap``) as LLVM IR: how many elements, and where each is.

Under ``vmap`` a handler built for rank ``r`` receives buffers of rank ``r + k``;
the leading ``k`` dims are batch dims, the same number on every buffer
(``expand_dims`` gives unbatched inputs size-1 dims, ``broadcast_all`` full ones).
Outputs carry the full batch; an input's size-1 batch dim broadcasts.
"""

from __future__ import annotations

from llvmlite import ir

from .builder import Builder
from .frame import I64, const, dim, entry_alloca
from .half import counted_loop

__all__ = ["batch_index_function", "batch_size"]


def batch_size(b: Builder, dims: ir.Value, nbatch: ir.Value) -> ir.Value:
    """Product of the first ``nbatch`` entries of the ``i64*`` ``dims``."""
    slot = entry_alloca(b, I64)
    b.store(const(1), slot)

    def body(b: Builder, j: ir.Value) -> None:
        b.store(b.mul(b.load(slot), dim(b, dims, j)), slot)

    counted_loop(b, nbatch, body)
    return b.load(slot)


def batch_index_function(module: ir.Module) -> ir.Function:
    """``i64 f(i64 b, i64* out_dims, i64 nbatch, i64* in_dims)``: the flat batch
    index into an input for flat output batch index ``b`` (size-1 dims broadcast;
    dims aligned from the left, as every buffer has ``nbatch`` of them)."""
    name = "pk.batch_index"
    if name in module.globals:
        return module.globals[name]
    ptr = I64.as_pointer()
    fn = ir.Function(module, ir.FunctionType(I64, [I64, ptr, I64, ptr]), name=name)
    fn.linkage = "internal"
    elem, out_dims, nbatch, in_dims = fn.args
    b = Builder(fn.append_basic_block("entry"))
    lin, mult, rem = (entry_alloca(b, I64) for _ in range(3))
    for slot, value in ((lin, const(0)), (mult, const(1)), (rem, elem)):
        b.store(value, slot)

    def body(b: Builder, step: ir.Value) -> None:
        j = b.sub(b.sub(nbatch, const(1)), step)  # innermost dim first
        od, d = dim(b, out_dims, j), dim(b, in_dims, j)
        r = b.load(rem)
        idx = b.srem(r, od)
        b.store(b.sdiv(r, od), rem)
        keep = b.icmp_signed("!=", d, const(1))
        b.store(
            b.add(b.load(lin), b.select(keep, b.mul(idx, b.load(mult)), const(0))), lin
        )
        b.store(b.mul(b.load(mult), d), mult)

    counted_loop(b, nbatch, body)
    b.ret(b.load(lin))
    return fn
