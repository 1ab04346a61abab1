"""Numba intrinsics that let a ``@cfunc`` speak the XLA FFI C ABI.

Numba cannot dereference an integer address by itself, so these emit the few LLVM
instructions a handler needs: loads and stores at ``base + offset``, pointer/int
casts, and two error paths:

- :func:`handler_error` and :func:`guarded_call` take the GIL *only when something
  went wrong* and ask :mod:`polykernel.ffi._pyerror` (looked up by name, so cached
  machine code stays valid in a new process) to build an ``XLA_FFI_Error``;
- :func:`guarded_call` calls a jitted function with Numba's own calling convention
  and inspects its status word. Numba cfuncs swallow exceptions ("Exception ignored
  in ..."), so this is how the exception's type and message reach the JAX caller.

This module imports Numba; import it only from code that already needs Numba.
"""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

from . import abi

__all__ = ["guarded_call", "handler_error", "int2ptr", "ld32", "ld64", "st32"]

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_ERRMOD = "polykernel.ffi._pyerror"


def _ptr(builder, addr, ty):
    return builder.inttoptr(addr, ty.as_pointer())


@intrinsic
def ld64(typingctx, addr):
    """Load the int64 at integer address ``addr``."""

    def codegen(context, builder, sig, args):
        return builder.load(_ptr(builder, args[0], _I64))

    return types.int64(types.int64), codegen


@intrinsic
def ld32(typingctx, addr):
    """Load the int32 at ``addr``, sign-extended to int64."""

    def codegen(context, builder, sig, args):
        return builder.sext(builder.load(_ptr(builder, args[0], _I32)), _I64)

    return types.int64(types.int64), codegen


@intrinsic
def st32(typingctx, addr, value):
    """Store ``value`` truncated to int32 at ``addr``."""

    def codegen(context, builder, sig, args):
        builder.store(builder.trunc(args[1], _I32), _ptr(builder, args[0], _I32))
        return context.get_dummy_value()

    return types.void(types.int64, types.int64), codegen


@intrinsic
def int2ptr(typingctx, addr):
    """Turn an integer address into a ``void*`` (for ``carray`` and return values)."""

    def codegen(context, builder, sig, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return types.voidptr(types.int64), codegen


def _error_create(context, builder, api, message):
    """Emit ``XLA_FFI_Error_Create({28, NULL, message, INTERNAL})`` without the GIL."""
    struct = ir.LiteralStructType([_I64, cgutils.voidptr_t, cgutils.voidptr_t, _I32])
    slot = cgutils.alloca_once(builder, struct)
    value = ir.Constant(
        struct,
        [
            ir.Constant(_I64, abi.ERROR_CREATE_ARGS_SIZE),
            ir.Constant(cgutils.voidptr_t, None),
            ir.Constant(cgutils.voidptr_t, None),
            ir.Constant(_I32, abi.ERRC_INTERNAL),
        ],
    )
    builder.store(builder.insert_value(value, message, 2), slot)
    fnty = ir.FunctionType(cgutils.voidptr_t, [struct.as_pointer()])
    fn_addr = builder.load(
        _ptr(builder, builder.add(api, ir.Constant(_I64, abi.API_ERROR_CREATE)), _I64)
    )
    fn = builder.inttoptr(fn_addr, fnty.as_pointer())
    return builder.ptrtoint(builder.call(fn, [slot]), _I64)


def _call_python(context, builder, api, method, make_args, fallback):
    """With the GIL held, call ``_pyerror.<method>(api, *args)`` -> error address.

    Falls back to a fixed message (no Python) if the helper cannot be reached.
    """
    pyapi = context.get_python_api(builder)
    result = cgutils.alloca_once_value(builder, ir.Constant(_I64, 0))
    gil = pyapi.gil_ensure()
    pre = make_args(pyapi)  # may fetch a pending exception, so it runs first
    modname = context.insert_const_string(builder.module, _ERRMOD)
    mod = pyapi.import_module(modname)
    with builder.if_then(cgutils.is_not_null(builder, mod)):
        fn = pyapi.object_getattr_string(mod, method)
        with builder.if_then(cgutils.is_not_null(builder, fn)):
            api_obj = pyapi.long_from_longlong(api)
            out = pyapi.call_function_objargs(fn, [api_obj, *pre.objects])
            with builder.if_then(cgutils.is_not_null(builder, out)):
                addr = builder.ptrtoint(pyapi.long_as_voidptr(out), _I64)
                builder.store(addr, result)
                pyapi.decref(out)
            pyapi.decref(api_obj)
            pyapi.decref(fn)
        pyapi.decref(mod)
    pre.release()
    pyapi.err_clear()
    pyapi.gil_release(gil)
    addr = builder.load(result)
    with builder.if_then(builder.icmp_unsigned("==", addr, ir.Constant(_I64, 0))):
        msg = context.insert_const_string(builder.module, fallback)
        builder.store(_error_create(context, builder, api, msg), result)
    return builder.load(result)


class _Objects:
    """Python objects built for a helper call, released after it."""

    def __init__(self, pyapi, objects, owned):
        self.pyapi, self.objects, self.owned = pyapi, objects, owned

    def release(self):
        for obj in self.owned:
            self.pyapi.decref(obj)


def _literal(value, what):
    if not isinstance(value, types.StringLiteral):
        raise TypeError(f"polykernel.ffi intrinsics: {what} must be a string literal")
    return value.literal_value


@intrinsic(prefer_literal=True)
def handler_error(typingctx, api, label, kind, a, b, c):
    """Return an ``XLA_FFI_Error*`` (as int64) describing a mismatched call frame."""
    text = _literal(label, "label")

    def codegen(context, builder, sig, args):
        api_v = args[0]
        ints = [
            context.cast(builder, v, t, types.int64)
            for v, t in zip(args[2:], sig.args[2:], strict=True)
        ]

        def make_args(pyapi):
            cstr = context.insert_const_string(builder.module, text)
            objs = [pyapi.string_from_string(cstr)]
            objs += [pyapi.long_from_longlong(v) for v in ints]
            return _Objects(pyapi, objs, objs)

        return _call_python(
            context,
            builder,
            api_v,
            "handler_error",
            make_args,
            "polykernel numba_kernel: call frame does not match the handler",
        )

    return types.int64(types.int64, label, kind, a, b, c), codegen


@intrinsic(prefer_literal=True)
def guarded_call(typingctx, api, label, fn, args):
    """Call jitted ``fn(*args)``; return 0, or an ``XLA_FFI_Error*`` if it raised."""
    text = _literal(label, "label")
    if not isinstance(fn, types.Dispatcher) or not isinstance(args, types.BaseTuple):
        raise TypeError("guarded_call(api, label, dispatcher, tuple_of_args)")
    argtys = tuple(args.types)
    call_sig = typingctx.resolve_function_type(fn, argtys, {})
    if call_sig is None:
        raise TypeError(f"guarded_call: cannot call {fn} with {argtys}")

    def codegen(context, builder, sig, llargs):
        cres = fn.dispatcher.get_compile_result(call_sig)
        context.add_linking_libs([cres.library])
        callee = context.declare_function(builder.module, cres.fndesc)
        values = [builder.extract_value(llargs[3], i) for i in range(len(argtys))]
        status, _ = context.call_conv.call_function(
            builder, callee, cres.fndesc.restype, cres.fndesc.argtypes, values
        )
        result = cgutils.alloca_once_value(builder, ir.Constant(_I64, 0))
        with builder.if_then(status.is_error, likely=False):

            def make_args(pyapi):
                context.call_conv.raise_error(builder, pyapi, status)
                slots = [cgutils.alloca_once(builder, pyapi.pyobj) for _ in range(3)]
                for slot in slots:
                    builder.store(ir.Constant(pyapi.pyobj, None), slot)
                pyapi.err_fetch(*slots)
                norm = pyapi._get_function(
                    ir.FunctionType(ir.VoidType(), [pyapi.pyobjptr] * 3),
                    name="PyErr_NormalizeException",
                )
                builder.call(norm, slots)
                none = pyapi.borrow_none()
                t, v, tb = (builder.load(s) for s in slots)
                pick = [
                    builder.select(cgutils.is_null(builder, o), none, o) for o in (t, v)
                ]
                cstr = context.insert_const_string(builder.module, text)
                lab = pyapi.string_from_string(cstr)

                # Py_DecRef is NULL-safe, so the fetched triple is released as is.
                return _Objects(pyapi, [lab, *pick], [lab, t, v, tb])

            err = _call_python(
                context,
                builder,
                llargs[0],
                "kernel_exception",
                make_args,
                "polykernel numba_kernel: the kernel raised an exception",
            )
            builder.store(err, result)
        return builder.load(result)

    return types.int64(api, label, fn, args), codegen
