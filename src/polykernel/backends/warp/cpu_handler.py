"""The XLA FFI handler of a Warp kernel on CPU: LLVM IR around Warp's entry point.

Warp compiles a kernel for its CPU device into native code with the entry point
``<name>_cpu_forward(launch_bounds_t<N>*, wp_args_<name>*)``. The handler generated
here (with :func:`polykernel.ffi.handler_ir.handler.define_handler`: frame checks,
``vmap`` batch loop, error paths) fills both structs on its stack from the call
frame and calls the entry: no Python and no GIL per call, like the Numba handler.

:func:`handler_module` calls the entry either by symbol name (a declaration,
resolved when :mod:`.linked` links the handler with Warp's object into one shared
object: the usual path) or at an address of this process (:func:`build_cpu_handler`,
JIT-compiled with llvmlite's MCJIT around Warp's own loaded module: the fallback
where no C compiler can link; Warp unloads a module's code when its executable is
collected, so that executable is kept alive with the handler).
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from ...errors import BackendUnavailableError
from ...ffi import targets
from ...ffi.handler_ir.signature import Signature
from .plan import (
    ARRAY_NDIM,
    ARRAY_SHAPE,
    ARRAY_STRIDES,
    KernelPlan,
    bounds_layout,
)
from .types import INSTALL_HINT

__all__ = ["CpuHandler", "build_cpu_handler", "handler_module", "llvm"]

_lock = threading.Lock()
_handlers: dict[str, CpuHandler] = {}
_CAPI = (
    "PyGILState_Ensure", "PyGILState_Release", "PyImport_ImportModule",
    "PyObject_GetAttrString", "PyLong_AsVoidPtr", "Py_DecRef", "PyErr_Clear",
    "PyErr_Fetch", "PyErr_NormalizeException", "PyObject_CallFunction",
)  # fmt: skip
_llvm_ready = False
_NOT_CACHED = (
    "the cache holds no copy of Warp's CPU object for it (it could not be "
    "written); define the kernel in that process"
)
_llvm_lock = threading.Lock()


@dataclass
class CpuHandler:
    """A registered handler and what keeps its code alive."""

    target: str
    address: int
    owners: tuple[Any, ...]  # the MCJIT engine and Warp's module executable


def llvm() -> Any:
    """llvmlite's binding, initialised once, with the C-API symbols the error
    paths call made known to MCJIT explicitly (its resolver does not search the
    executable's own symbols everywhere; a linked handler leaves them to the
    dynamic loader, like any extension module)."""
    global _llvm_ready
    try:
        import llvmlite.binding as binding
    except ImportError as err:
        raise BackendUnavailableError(
            "polykernel warp backend: the CPU handler needs 'llvmlite' (import "
            f"failed: {err}). Install it with: {INSTALL_HINT}"
        ) from err
    with _llvm_lock:
        if not _llvm_ready:
            binding.initialize_native_target()
            binding.initialize_native_asmprinter()
            for name in _CAPI:
                fn = getattr(ctypes.pythonapi, name)
                binding.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
            _llvm_ready = True
    return binding


def emit_warp_call(plan: KernelPlan, sig: Signature, entry: int | str, launch: Any):
    """The ``emit_call`` hook: fill the structs, call ``entry``, return NULL.

    ``entry`` is the entry point's symbol (declared in the module, resolved by the
    linker) or its address in this process. ``launch`` is a tuple of launch dims
    (ints) or the index of the buffer whose core dims are the launch dims.
    """
    from llvmlite import ir

    from ...ffi.handler_ir.builder import Builder
    from ...ffi.handler_ir.frame import (
        I16,
        I32,
        I64,
        PTR,
        address,
        const,
        entry_alloca as alloca,
    )

    attr_index = {name: i for i, (name, _d) in enumerate(sig.attrs)}
    size_at, mult_at, bounds_size = bounds_layout(plan.launch_ndim)
    words = plan.struct_size // 8

    def store(b, base, offset, value, ty) -> None:
        b.store(value, b.bitcast(address(b, base, offset), ty.as_pointer()))

    def emit(b: Builder, args) -> ir.Value:
        blob = b.bitcast(alloca(b, ir.ArrayType(I64, max(words, 1))), PTR)
        bounds = b.bitcast(alloca(b, ir.ArrayType(I64, bounds_size // 8)), PTR)
        for w in range(words):
            store(b, blob, 8 * w, const(0), I64)
        buffer = 0
        for arg in plan.args:
            if arg.kind == "scalar":
                pointer, _dtype = args.attrs[attr_index[arg.label]]
                ty = ir.IntType(8 * arg.size)  # bit-exact copy of the scalar
                value = b.load(b.bitcast(pointer, ty.as_pointer()))
                store(b, blob, arg.offset, value, ty)
                continue
            data, dims, dtype = args.views[buffer]
            buffer += 1
            dims = list(dims) or [const(1)]
            store(b, blob, arg.offset, data, PTR)
            step = const(_itemsize(dtype))
            for k in reversed(range(len(dims))):
                at = arg.offset + ARRAY_SHAPE + 4 * k
                store(b, blob, at, b.trunc(dims[k], I32), I32)
                store(b, blob, arg.offset + ARRAY_STRIDES + 4 * k,
                      b.trunc(step, I32), I32)  # fmt: skip
                step = b.mul(step, dims[k])
            store(b, blob, arg.offset + ARRAY_NDIM, const(len(dims), I16), I16)
        if isinstance(launch, tuple):
            dims = [const(d) for d in launch]
        else:
            dims = list(args.views[launch][1]) or [const(1)]
        dims = dims + [const(1)] * max(0, plan.launch_ndim - len(dims))
        size, mult = const(1), const(1)
        for k, d in enumerate(dims):
            if k < plan.launch_ndim:
                store(b, bounds, 4 * k, b.trunc(d, I32), I32)
                size = b.mul(size, d)
            else:
                mult = b.mul(mult, d)
        store(b, bounds, size_at, b.mul(size, mult), I64)
        store(b, bounds, mult_at, mult, I64)
        fnty = ir.FunctionType(ir.VoidType(), [PTR, PTR])
        if isinstance(entry, str):
            module = b.module
            fn = module.globals.get(entry) or ir.Function(module, fnty, name=entry)
        else:
            fn = b.inttoptr(const(entry), fnty.as_pointer())
        b.call(fn, [bounds, blob])
        return ir.Constant(PTR, None)

    return emit


def _itemsize(dtype: str) -> int:
    from ...ffi.handler_ir.handler import ITEMSIZE

    return ITEMSIZE[dtype]


def handler_module(
    tm: Any,
    target: str,
    sig: Signature,
    label: str,
    plan: KernelPlan,
    entry: int | str,
    launch: Any,
) -> Any:
    """The verified LLVM module of ``target``'s handler for target machine ``tm``
    (``entry``: see :func:`emit_warp_call`)."""
    from llvmlite import ir

    from ...ffi.handler_ir.handler import define_handler

    binding = llvm()
    module = ir.Module(name=target)
    module.triple = tm.triple
    module.data_layout = str(tm.target_data)
    define_handler(module, target, sig, label,
                   emit_warp_call(plan, sig, entry, launch))  # fmt: skip
    parsed = binding.parse_assembly(str(module))
    parsed.verify()
    return parsed


def build_cpu_handler(
    target: str,
    sig: Signature,
    label: str,
    plan: KernelPlan,
    entry: int,
    launch: Any,
    module_exec: Any,
    portable: bool = True,
) -> CpuHandler:
    """JIT-compile (once per process and ``target``) and register the handler
    around ``entry``, an address in this process (the fallback path);
    ``portable`` says whether a copy of Warp's object is in the cache."""
    with _lock:
        known = _handlers.get(target)
        if known is not None:
            return known
        binding = llvm()
        tm = binding.Target.from_default_triple().create_target_machine(opt=2)
        parsed = handler_module(tm, target, sig, label, plan, entry, launch)
        engine = binding.create_mcjit_compiler(parsed, tm)
        engine.finalize_object()
        address = engine.get_function_address(target)
        handler = CpuHandler(target, address, (engine, tm, module_exec))
        register_cpu(target, address, label, handler,
                     "" if portable else _NOT_CACHED)  # fmt: skip
        _handlers[target] = handler
        return handler


def register_cpu(
    target: str, address: int, label: str, owner: Any, note: str = "",
    artefact: Any = None,
) -> None:
    """Register a Warp CPU handler (JIT-compiled or linked): its name is a digest of
    everything the handler does, so it is its identity too."""
    targets.register(
        target, address, platform="cpu", identity=target, backend="warp",
        label=label, owner=owner, portable=not note, note=note, artefact=artefact,
    )  # fmt: skip
