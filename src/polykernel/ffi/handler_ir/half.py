"""float16/bfloat16 <-> float32 conversion loops, as LLVM IR on integer bits.

Numba has no half-precision arithmetic on CPU, so by default a handler converts
half-precision inputs to float32 scratch arrays and rounds float32 results back
(to nearest, ties to even; NaN stays NaN, overflow becomes inf). The conversions
are written with integer operations only: no libcalls (``__truncsfhf2`` may not
resolve inside a JIT) and no dependence on F16C, so one artefact works on any
x86-64 or aarch64 CPU; LLVM vectorises the loops.
"""

from __future__ import annotations

from llvmlite import ir

from .builder import Builder
from .frame import I16, I32, I64, const

__all__ = ["conversion_function", "counted_loop"]

F32 = ir.FloatType()


def counted_loop(builder: Builder, count: ir.Value, body) -> None:
    """Emit ``for i in range(count): body(builder, i)``."""
    start = builder.block
    head = builder.append_basic_block("loop.head")
    step = builder.append_basic_block("loop.body")
    done = builder.append_basic_block("loop.done")
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(I64, name="i")
    i.add_incoming(const(0), start)
    builder.cbranch(builder.icmp_signed("<", i, count), step, done)
    builder.position_at_end(step)
    body(builder, i)
    i.add_incoming(builder.add(i, const(1)), builder.block)
    builder.branch(head)
    builder.position_at_end(done)


def _i32(v: int) -> ir.Constant:
    return const(v & 0xFFFFFFFF, I32)


def _f16_to_f32(b: Builder, h: ir.Value) -> ir.Value:
    h = b.zext(h, I32)
    sign = b.shl(b.and_(h, _i32(0x8000)), _i32(16))
    exp = b.and_(b.lshr(h, _i32(10)), _i32(0x1F))
    mant = b.and_(h, _i32(0x3FF))
    mant13 = b.shl(mant, _i32(13))
    normal = b.or_(b.shl(b.add(exp, _i32(112)), _i32(23)), mant13)
    infnan = b.or_(_i32(0x7F800000), mant13)
    # subnormal (or zero): mant * 2**-24 is exact in float32
    small = b.fmul(b.uitofp(mant, F32), ir.Constant(F32, 2.0**-24))
    small = b.bitcast(small, I32)
    is_special = b.icmp_unsigned("==", exp, _i32(0x1F))
    is_small = b.icmp_unsigned("==", exp, _i32(0))
    bits = b.select(is_special, infnan, b.select(is_small, small, normal))
    return b.bitcast(b.or_(bits, sign), F32)


def _f32_to_f16(b: Builder, x: ir.Value) -> ir.Value:
    # F. Giesen's float_to_half_fast3_rtne, on integers
    f = b.bitcast(x, I32)
    sign = b.and_(f, _i32(0x80000000))
    f = b.xor(f, sign)
    big = b.select(
        b.icmp_unsigned(">", f, _i32(0x7F800000)), _i32(0x7E00), _i32(0x7C00)
    )
    magic = _i32(126 << 23)  # ((127 - 15) + (23 - 10) + 1) << 23
    summed = b.fadd(b.bitcast(f, F32), b.bitcast(magic, F32))
    small = b.sub(b.bitcast(summed, I32), magic)
    odd = b.and_(b.lshr(f, _i32(13)), _i32(1))
    biased = b.add(b.add(f, _i32(((15 - 127) << 23) + 0xFFF)), odd)
    normal = b.lshr(biased, _i32(13))
    is_big = b.icmp_unsigned(">=", f, _i32((127 + 16) << 23))
    is_small = b.icmp_unsigned("<", f, _i32(113 << 23))
    bits = b.select(is_big, big, b.select(is_small, small, normal))
    return b.trunc(b.or_(bits, b.lshr(sign, _i32(16))), I16)


def _bf16_to_f32(b: Builder, h: ir.Value) -> ir.Value:
    return b.bitcast(b.shl(b.zext(h, I32), _i32(16)), F32)


def _f32_to_bf16(b: Builder, x: ir.Value) -> ir.Value:
    f = b.bitcast(x, I32)
    is_nan = b.icmp_unsigned(">", b.and_(f, _i32(0x7FFFFFFF)), _i32(0x7F800000))
    bias = b.add(_i32(0x7FFF), b.and_(b.lshr(f, _i32(16)), _i32(1)))
    rounded = b.lshr(b.add(f, bias), _i32(16))
    quiet = b.or_(b.lshr(f, _i32(16)), _i32(0x40))
    return b.trunc(b.select(is_nan, quiet, rounded), I16)


_CONVERT = {
    ("float16", "in"): _f16_to_f32,
    ("float16", "out"): _f32_to_f16,
    ("bfloat16", "in"): _bf16_to_f32,
    ("bfloat16", "out"): _f32_to_bf16,
}


def conversion_function(module: ir.Module, dtype: str, direction: str) -> ir.Function:
    """``void f(src*, dst*, i64 n)`` converting ``dtype`` to float32 (``"in"``) or
    float32 to ``dtype`` (``"out"``); defined once per module, internal."""
    name = f"pk.convert.{dtype}.{direction}"
    if name in module.globals:
        return module.globals[name]
    src_t, dst_t = (I16, F32) if direction == "in" else (F32, I16)
    fnty = ir.FunctionType(ir.VoidType(), [src_t.as_pointer(), dst_t.as_pointer(), I64])
    fn = ir.Function(module, fnty, name=name)
    fn.linkage = "internal"
    for arg in fn.args[:2]:
        arg.add_attribute("noalias")
    src, dst, n = fn.args
    b = Builder(fn.append_basic_block("entry"))
    convert = _CONVERT[(dtype, direction)]

    def body(b: Builder, i: ir.Value) -> None:
        value = b.load(b.gep(src, [i], inbounds=True))
        b.store(convert(b, value), b.gep(dst, [i], inbounds=True))

    counted_loop(b, n, body)
    b.ret_void()
    return fn
