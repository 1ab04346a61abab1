"""Assemble an XLA FFI handler as LLVM IR around a backend's "call the kernel".

``define ptr @<name>(ptr %frame)``:

1. the metadata query gets the API version (traits 0) and returns; any stage but
   EXECUTE returns OK (nothing to prepare);
2. the frame is checked against the :class:`Signature` (``checks``); a mismatch
   returns an ``XLA_FFI_Error`` worded by Python (taken under the GIL, error path
   only);
3. leading dims beyond the built rank are batch dims (``vmap``): every buffer
   carries the same number, inputs may have size 1 there (broadcast); the handler
   loops over the batch, one kernel call per element, on zero-copy views;
4. float16/bfloat16 buffers reach the kernel as float32 copies unless the
   signature asks for raw bits (``half``).

The backend supplies ``emit_call(builder, KernelArgs) -> XLA_FFI_Error*``; nothing
here knows Numba, so another LLVM-based backend can reuse it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from .. import abi
from .batch import batch_index_function, batch_size
from .builder import Builder
from .checks import Checker
from .frame import I32, I64, PTR, Buffer, FrameReader, const, dim
from .pyerror import call_helper, cstring, gil_ensure, gil_release
from .scratch import Scratch
from .signature import Signature

__all__ = ["ITEMSIZE", "KernelArgs", "define_handler"]

ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2,
    "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8,
    "float64": 8, "complex64": 8, "complex128": 16,
}  # fmt: skip


@dataclass
class KernelArgs:
    """What the kernel gets for one batch element."""

    api: ir.Value  # XLA_FFI_Api*, for error creation
    label: ir.Value  # i8* to "<kernel>|<spec>", for messages
    views: list[tuple[ir.Value, list[ir.Value], str]]  # (data, core dims, dtype)
    attrs: list[tuple[ir.Value, str]]  # (pointer to the scalar, dtype)


EmitCall = Callable[[Builder, KernelArgs], ir.Value]


def define_handler(
    module: ir.Module, name: str, sig: Signature, label: str, emit_call: EmitCall
) -> ir.Function:
    """Define the external handler ``name`` in ``module`` (see the module doc)."""
    fn = ir.Function(module, ir.FunctionType(PTR, [PTR]), name=name)
    frame_arg = fn.args[0]
    b = Builder(fn.append_basic_block("entry"))
    frame = FrameReader(b, frame_arg)
    null = ir.Constant(PTR, None)
    _answer_metadata_and_stages(b, frame, null)
    api = frame.api()
    error_block = fn.append_basic_block("frame.error")
    check = Checker(b, error_block)
    check.counts(frame, len(sig.ins), len(sig.outs), len(sig.attrs))
    bufs = [frame.buffer("input", i, d, r) for i, (d, r) in enumerate(sig.ins)]
    bufs += [frame.buffer("output", i, d, r) for i, (d, r) in enumerate(sig.outs)]
    for buf in bufs:
        check.header(buf)
    out0 = bufs[len(sig.ins)]
    nbatch = b.sub(out0.frame_rank, const(out0.rank))
    _check_batch(b, check, bufs, out0, nbatch, no_inputs=not sig.ins)
    attrs = [(check.attribute(frame, i, n, d), d) for i, (n, d) in enumerate(sig.attrs)]
    for buf in bufs:
        _core_dims(b, buf, nbatch)
    scratch = Scratch(b, sig, bufs, check)
    label_ptr = cstring(b, f"{label}|{sig.spec()}")
    total = batch_size(b, out0.dims, nbatch)
    _batch_loop(b, sig, bufs, nbatch, out0, total, scratch, emit_call,
                KernelArgs(api, label_ptr, [], attrs))  # fmt: skip
    scratch.free(b)
    b.ret(null)
    _frame_error(error_block, check, api, label_ptr)
    return fn


def _answer_metadata_and_stages(b: Builder, frame: FrameReader, null) -> None:
    ext = frame.extension()
    has_ext = b.append_basic_block("ext")
    answer = b.append_basic_block("metadata")
    execute = b.append_basic_block("stage")
    b.cbranch(b.icmp_unsigned("!=", ext, null), has_ext, execute)
    b.position_at_end(has_ext)
    b.cbranch(frame.is_metadata(ext), answer, execute)
    b.position_at_end(answer)
    frame.answer_metadata(ext)
    b.ret(null)
    b.position_at_end(execute)
    stage = frame.stage()
    with b.if_then(b.icmp_signed("!=", stage, const(abi.STAGE_EXECUTE, I32))):
        b.ret(null)


def _check_batch(b, check: Checker, bufs, out0: Buffer, nbatch, no_inputs) -> None:
    for buf in bufs:
        if buf is not out0:
            check.same_batch_rank(buf, nbatch)
    if no_inputs:  # nothing can be batched without inputs
        check.fail_if(
            b.icmp_signed("!=", nbatch, const(0)), 2, 0, out0.code, out0.frame_rank
        )
    for buf in bufs:
        if buf is not out0:
            check.batch_dims(buf, nbatch, out0.dims)


def _core_dims(b: Builder, buf: Buffer, nbatch: ir.Value) -> None:
    dims = [dim(b, buf.dims, b.add(nbatch, const(j))) for j in range(buf.rank)]
    count = const(1)
    for d in dims:
        count = b.mul(count, d)
    buf.core_dims, buf.count = dims, count


def _batch_loop(b, sig, bufs, nbatch, out0, total, scratch, emit_call, args) -> None:
    from .half import counted_loop

    nin = len(sig.ins)
    index_fn = batch_index_function(b.module)
    batched = b.icmp_signed("!=", nbatch, const(0))

    def body(b: Builder, elem: ir.Value) -> None:
        views = []
        for k, buf in enumerate(bufs):
            lin = elem
            if k < nin:  # inputs broadcast: only batched calls need the index math
                lin = _call_if(
                    b, batched, index_fn, [elem, out0.dims, nbatch, buf.dims]
                )
            offset = b.mul(b.mul(lin, buf.count), const(ITEMSIZE[buf.dtype]))
            data = b.gep(buf.data, [offset], inbounds=True)
            views.append(scratch.view(b, k, buf, data))
        err = emit_call(b, KernelArgs(args.api, args.label, views, args.attrs))
        failed = b.icmp_unsigned("!=", err, ir.Constant(PTR, None))
        with b.if_then(failed, likely=False):
            scratch.free(b)
            b.ret(err)
        scratch.write_back(b)

    counted_loop(b, total, body)


def _call_if(b: Builder, cond: ir.Value, fn: ir.Function, args) -> ir.Value:
    """``cond ? fn(*args) : 0`` with the call only on the taken path."""
    start = b.block
    call_block = b.append_basic_block("call")
    join = b.append_basic_block("join")
    b.cbranch(cond, call_block, join)
    b.position_at_end(call_block)
    value = b.call(fn, args)
    b.branch(join)
    b.position_at_end(join)
    phi = b.phi(I64)
    phi.add_incoming(value, call_block)
    phi.add_incoming(const(0), start)
    return phi


def _frame_error(block: ir.Block, check: Checker, api, label_ptr) -> None:
    b = Builder(block)
    b.position_at_end(block)
    kind, x, y, z = check.phis
    state = gil_ensure(b)
    err = call_helper(
        b, api, "handler_error", "LsLLLL", [b.ptrtoint(api, I64), label_ptr,
        kind, x, y, z], "polykernel: the call frame does not match the handler",
    )  # fmt: skip
    gil_release(b, state)
    b.ret(err)
