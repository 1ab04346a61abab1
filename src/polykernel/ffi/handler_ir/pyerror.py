"""LLVM IR for a handler's error paths: take the GIL, let Python word the message.

A handler never touches Python on its success path. When a check fails or the
kernel raises, it takes the GIL and calls a function of
:mod:`polykernel.ffi._pyerror` (found by module and attribute name at run time, so
the machine code holds no address and stays valid in any process), which returns
an ``XLA_FFI_Error*``. If that fails too, a fixed message is created through the
``XLA_FFI_Api`` table directly.

Only CPython C-API functions are called, by name: they resolve in any process that
embeds Python, and none of them is Numba's.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir

from .. import abi
from .builder import Builder
from .frame import I8, I32, I64, PTR, address, const, entry_alloca

__all__ = ["call_helper", "capi", "cstring", "error_create", "gil_ensure"]

_ERRMOD = "polykernel.ffi._pyerror"
_SIGNATURES = {
    "PyGILState_Ensure": (I32, ()),
    "PyGILState_Release": (ir.VoidType(), (I32,)),
    "PyImport_ImportModule": (PTR, (PTR,)),
    "PyObject_GetAttrString": (PTR, (PTR, PTR)),
    "PyLong_AsVoidPtr": (PTR, (PTR,)),
    "Py_DecRef": (ir.VoidType(), (PTR,)),
    "PyErr_Clear": (ir.VoidType(), ()),
    "PyErr_Fetch": (ir.VoidType(), (PTR.as_pointer(),) * 3),
    "PyErr_NormalizeException": (ir.VoidType(), (PTR.as_pointer(),) * 3),
}


def capi(module: ir.Module, name: str) -> ir.Function:
    """Declare (once) the CPython C-API function ``name`` in ``module``."""
    if name in module.globals:
        return module.globals[name]
    if name == "PyObject_CallFunction":
        fnty = ir.FunctionType(PTR, (PTR, PTR), var_arg=True)
    else:
        ret, args = _SIGNATURES[name]
        fnty = ir.FunctionType(ret, args)
    return ir.Function(module, fnty, name=name)


def cstring(builder: Builder, text: str) -> ir.Value:
    """A pointer to a NUL-terminated private constant holding ``text``."""
    module = builder.module
    data = bytearray(text.encode("utf-8", "replace") + b"\0")
    gv = ir.GlobalVariable(
        module, ir.ArrayType(I8, len(data)), name=module.get_unique_name("pk.str")
    )
    gv.global_constant = True
    gv.linkage = "private"
    gv.unnamed_addr = True
    # llvmlite (no type hints) sets `initializer` to None in __init__ only and its
    # generated `bitcast` looks like it returns None: both wrong, hence the ignores.
    gv.initializer = ir.Constant(ir.ArrayType(I8, len(data)), data)  # pyright: ignore[reportAttributeAccessIssue]
    # a constant expression: valid in every block
    return gv.bitcast(PTR)  # pyright: ignore[reportReturnType]


def gil_ensure(builder: Builder) -> ir.Value:
    """Take the GIL (from any thread); pass the result to :func:`gil_release`."""
    return builder.call(capi(builder.module, "PyGILState_Ensure"), [])


def gil_release(builder: Builder, state: ir.Value) -> None:
    builder.call(capi(builder.module, "PyGILState_Release"), [state])


def error_create(
    builder: Builder, api: ir.Value, message: ir.Value, errc: int
) -> ir.Value:
    """``XLA_FFI_Error_Create(&{size, NULL, message, errc})`` through the API table."""
    struct = ir.LiteralStructType([I64, PTR, PTR, I32])
    slot = entry_alloca(builder, struct)
    value = ir.Constant(
        struct,
        [const(abi.ERROR_CREATE_ARGS_SIZE), ir.Constant(PTR, None), None,
         const(errc, I32)],
    )  # fmt: skip
    builder.store(builder.insert_value(value, message, 2), slot)
    fnty = ir.FunctionType(PTR, [struct.as_pointer()])
    table_slot = address(builder, api, abi.API_ERROR_CREATE)
    fn = builder.load(builder.bitcast(table_slot, fnty.as_pointer().as_pointer()))
    return builder.call(fn, [slot])


def call_helper(
    builder: Builder,
    api: ir.Value,
    method: str,
    fmt: str,
    args: Sequence[ir.Value],
    fallback: str,
) -> ir.Value:
    """With the GIL held: ``_pyerror.<method>(*args)`` (``fmt`` as for
    ``Py_BuildValue``) -> the ``XLA_FFI_Error*`` it returns, else ``fallback``."""
    m = builder.module
    null = ir.Constant(PTR, None)
    result = entry_alloca(builder, PTR)
    builder.store(null, result)
    mod = builder.call(capi(m, "PyImport_ImportModule"), [cstring(builder, _ERRMOD)])
    with builder.if_then(builder.icmp_unsigned("!=", mod, null)):
        getattr_ = capi(m, "PyObject_GetAttrString")
        fn = builder.call(getattr_, [mod, cstring(builder, method)])
        with builder.if_then(builder.icmp_unsigned("!=", fn, null)):
            call = capi(m, "PyObject_CallFunction")
            out = builder.call(call, [fn, cstring(builder, fmt), *args])
            with builder.if_then(builder.icmp_unsigned("!=", out, null)):
                builder.store(builder.call(capi(m, "PyLong_AsVoidPtr"), [out]), result)
                builder.call(capi(m, "Py_DecRef"), [out])
            builder.call(capi(m, "Py_DecRef"), [fn])
        builder.call(capi(m, "Py_DecRef"), [mod])
    builder.call(capi(m, "PyErr_Clear"), [])
    err = builder.load(result)
    with builder.if_then(builder.icmp_unsigned("==", err, null)):
        created = error_create(
            builder, api, cstring(builder, fallback), abi.ERRC_INTERNAL
        )
        builder.store(created, result)
    return builder.load(result)
