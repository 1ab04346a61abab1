"""The Numba half of a generated handler: call the compiled kernel, catch its raise.

:func:`emit_kernel_call` builds Numba array structs over the handler's zero-copy
views (meminfo NULL: the memory belongs to XLA), loads the attribute scalars,
calls the kernel with Numba's own calling convention and, only if its status
word says it raised, takes the GIL, turns the status into the Python exception
(``call_conv.raise_error``) and hands its type and message to
``polykernel.ffi._pyerror.kernel_exception``. Numba's ``@cfunc`` would print and
swallow that exception; this way the JAX caller sees it.
"""

from __future__ import annotations

from typing import Any

from llvmlite import ir

from ...ffi.handler_ir.builder import Builder
from ...ffi.handler_ir.frame import I64, PTR, entry_alloca
from ...ffi.handler_ir.handler import KernelArgs
from ...ffi.handler_ir.pyerror import call_helper, capi, gil_ensure, gil_release
from .compile import Binding, Source

__all__ = ["emit_kernel_call"]


def emit_kernel_call(context: Any, binding: Binding):
    """Return the ``emit_call`` hook of :func:`define_handler` for ``binding``."""
    fndesc = binding.cres.fndesc

    def emit(b: Builder, args: KernelArgs) -> ir.Value:
        callee = context.declare_function(b.module, fndesc)
        values = [_value(context, b, src, args) for src in binding.sources]
        status, result = context.call_conv.call_function(
            b, callee, fndesc.restype, fndesc.argtypes, values
        )
        slot = entry_alloca(b, PTR)
        b.store(ir.Constant(PTR, None), slot)
        with b.if_else(status.is_error, likely=False) as (raised, ok):
            with raised:
                b.store(_exception_error(context, b, status, args), slot)
            with ok:
                _release_result(context, b, fndesc.restype, result)
        return b.load(slot)

    return emit


def _value(context: Any, b: Builder, src: Source, args: KernelArgs) -> Any:
    if src.kind == "buffer":
        data, dims, _dtype = args.views[src.index]
        return _array(context, b, src.nbtype, data, dims)
    if src.kind == "attr":
        pointer, _dtype = args.attrs[src.index]
        model = context.data_model_manager[src.nbtype]
        typed = b.bitcast(pointer, model.get_data_type().as_pointer())
        return model.from_data(b, b.load(typed))
    if src.kind == "star":
        items = [_value(context, b, part, args) for part in src.parts]
        return context.make_tuple(b, src.nbtype, items)
    return ir.Constant(context.get_value_type(src.nbtype), None)  # omitted


def _array(context: Any, b: Builder, aryty: Any, data, dims) -> ir.Value:
    """A C-contiguous Numba array over ``data`` with shape ``dims``.

    Built as ``context.make_array`` and ``numba.np.arrayobj.populate_array`` build
    one for a plain array type (the same fields set in the same order, so the same
    IR), without asking Numba's context for an ``__array__`` conversion or a
    constant: either lookup loads all of Numba's registries (~300 ms, scipy.linalg
    included), and :mod:`.ahead` builds this IR before they are loaded, to start its
    thread that much sooner."""
    from numba.core import cgutils

    ary = cgutils.create_struct_proxy(aryty)(context, b)
    intp = context.get_value_type(_intp())
    itemsize = context.get_abi_sizeof(context.get_data_type(aryty.dtype))
    strides, step = [], ir.Constant(I64, itemsize)
    for d in reversed(dims):
        strides.insert(0, step)
        step = b.mul(step, d)
    nitems = ir.Constant(intp, 1)
    for d in dims:
        nitems = b.mul(nitems, d, flags=["nsw"])
    model = ary._datamodel
    fields = {
        "shape": cgutils.pack_array(b, list(dims), ty=I64),
        "strides": cgutils.pack_array(b, strides, ty=I64),
        "data": b.bitcast(data, ary.data.type),
        "itemsize": ir.Constant(intp, itemsize),
        "meminfo": ir.Constant(context.get_value_type(model.get_type("meminfo")), None),
        "parent": ir.Constant(context.get_value_type(model.get_type("parent")), None),
        "nitems": nitems,
    }
    for name, value in fields.items():
        setattr(ary, name, value)
    return ary._getvalue()


def _intp() -> Any:
    from numba.core import types

    return types.intp


def _release_result(context: Any, b: Builder, restype: Any, result) -> None:
    """Drop the kernel's return value (kernels write outputs in place)."""
    if (
        context.enable_nrt
        and context.data_model_manager[restype].contains_nrt_meminfo()
    ):
        context.nrt.decref(b, restype, result)


def _exception_error(context: Any, b: Builder, status, args: KernelArgs):
    """Under the GIL: the kernel's exception -> ``XLA_FFI_Error*``."""
    module = b.module
    state = gil_ensure(b)
    pyapi = context.get_python_api(b)
    context.call_conv.raise_error(b, pyapi, status)  # sets the Python error
    slots = [entry_alloca(b, PTR) for _ in range(3)]
    for slot in slots:
        b.store(ir.Constant(PTR, None), slot)
    b.call(capi(module, "PyErr_Fetch"), slots)
    b.call(capi(module, "PyErr_NormalizeException"), slots)
    exc_type, exc_value, tb = (b.load(s) for s in slots)
    none = b.bitcast(pyapi.borrow_none(), PTR)
    null = ir.Constant(PTR, None)
    picked = [
        b.select(b.icmp_unsigned("==", v, null), none, v) for v in (exc_type, exc_value)
    ]
    err = call_helper(
        b,
        args.api,
        "kernel_exception",
        "LsOO",
        [b.ptrtoint(args.api, I64), args.label, *picked],
        "polykernel numba_kernel: the kernel raised an exception",
    )
    for obj in (exc_type, exc_value, tb):  # Py_DecRef accepts NULL
        b.call(capi(module, "Py_DecRef"), [obj])
    gil_release(b, state)
    return err
