"""float32 scratch copies of float16/bfloat16 buffers, as LLVM IR.

One ``malloc`` per call holds a float32 array for every converted buffer (sized
for one batch element and reused across the batch loop); it is freed on every
exit, the error ones included. Inputs are converted in before each kernel call,
outputs rounded back after it; an output aliased to an input shares the input's
copy, so the kernel sees one array under both names, as without conversion.
"""

from __future__ import annotations

from llvmlite import ir

from .builder import Builder
from .frame import I16, I64, PTR, Buffer, const
from .half import F32, conversion_function
from .signature import Signature

__all__ = ["Scratch"]

_ALIGN = 64


class Scratch:
    """Allocates the copies at construction (after the frame checks)."""

    def __init__(self, b: Builder, sig: Signature, bufs: list[Buffer], check):
        self.sig, self.bufs = sig, bufs
        self.offsets: dict[int, ir.Value] = {}
        self.data: dict[int, ir.Value] = {}  # this element's slice, per output
        nin = len(sig.ins)
        total = const(0)
        for k, buf in enumerate(bufs):
            if not sig.converted(buf.dtype):
                continue
            shared = sig.shared_temp(k - nin) if k >= nin else None
            if shared is not None:
                self.offsets[k] = self.offsets[shared]
                continue
            self.offsets[k] = total
            assert buf.count is not None  # set with the core dims, before Scratch
            size = b.mul(buf.count, const(4))
            total = b.add(total, b.and_(b.add(size, const(_ALIGN - 1)), const(-_ALIGN)))
        self.base = None
        if not self.offsets:
            return
        module = b.module
        malloc = _declare(module, "malloc", PTR, [I64])
        self.base = b.call(malloc, [total])
        null = ir.Constant(PTR, None)
        failed = b.and_(
            b.icmp_unsigned("==", self.base, null), b.icmp_signed(">", total, const(0))
        )
        check.fail_if(failed, 7, total, 0, 0)

    def view(self, b: Builder, k: int, buf: Buffer, data: ir.Value):
        """``(pointer, core dims, dtype)`` the kernel sees for buffer ``k``."""
        if k not in self.offsets:
            return data, buf.core_dims, self.sig.view_dtype(buf.dtype)
        temp = b.gep(self.base, [self.offsets[k]], inbounds=True)
        if buf.role == "input":
            convert = conversion_function(b.module, buf.dtype, "in")
            args = [
                b.bitcast(data, I16.as_pointer()),
                b.bitcast(temp, F32.as_pointer()),
            ]
            b.call(convert, [*args, buf.count])
        else:
            self.data[k] = data
        return temp, buf.core_dims, "float32"

    def write_back(self, b: Builder) -> None:
        """Round each converted output's copy into its half-precision slice."""
        for k, data in self.data.items():
            buf = self.bufs[k]
            temp = b.gep(self.base, [self.offsets[k]], inbounds=True)
            convert = conversion_function(b.module, buf.dtype, "out")
            args = [
                b.bitcast(temp, F32.as_pointer()),
                b.bitcast(data, I16.as_pointer()),
            ]
            b.call(convert, [*args, buf.count])

    def free(self, b: Builder) -> None:
        if self.base is not None:
            b.call(_declare(b.module, "free", ir.VoidType(), [PTR]), [self.base])


def _declare(module: ir.Module, name: str, ret: ir.Type, args: list) -> ir.Function:
    if name in module.globals:
        return module.globals[name]
    return ir.Function(module, ir.FunctionType(ret, args), name=name)
