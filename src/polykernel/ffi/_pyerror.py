"""Build ``XLA_FFI_Error`` objects from Python, for the error paths of handlers.

A generated Numba handler never runs Python on its success path. When something
goes wrong (a buffer of the wrong dtype, an exception inside the user's kernel) it
takes the GIL and calls one of the functions below, which format a readable message
and create the error through the ``XLA_FFI_Api`` table with ctypes. The functions
return the error pointer as an int; XLA copies the message, so nothing here has to
outlive the call, and concurrent failures on several threads never share a buffer.

The functions are looked up by module and attribute name at run time (never by a
baked-in address), so a handler loaded from the disk cache finds them again.
"""

from __future__ import annotations

import ctypes

from . import abi

__all__ = ["create_error", "handler_error", "kernel_exception"]

# XLA_FFI_AttrType values other than SCALAR, as a caller would describe them.
_ATTR_KINDS = {1: "an array", 2: "a dictionary", 4: "a string"}


class _ErrorCreateArgs(ctypes.Structure):
    _fields_ = (
        ("struct_size", ctypes.c_size_t),
        ("extension_start", ctypes.c_void_p),
        ("message", ctypes.c_char_p),
        ("errc", ctypes.c_int32),
    )


_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_ErrorCreateArgs))


def create_error(api: int, message: str, errc: int = abi.ERRC_INTERNAL) -> int:
    """Create an ``XLA_FFI_Error`` through the API table at address ``api``.

    Example:
        This needs a live ``XLA_FFI_Api*``, which only a running handler has::

            err = create_error(api_address, "bad input", abi.ERRC_INVALID_ARGUMENT)
    """
    fn_address = ctypes.c_void_p.from_address(api + abi.API_ERROR_CREATE).value
    assert fn_address is not None, "XLA_FFI_Api without Error_Create"
    args = _ErrorCreateArgs(
        abi.ERROR_CREATE_ARGS_SIZE, None, message.encode("utf-8", "replace"), errc
    )
    return int(_CREATE(fn_address)(ctypes.byref(args)) or 0)


def kernel_exception(api: int, label: str, exc_type: object, exc: object) -> int:
    """Error for an exception raised inside a kernel: keeps its type and message."""
    name = getattr(exc_type, "__qualname__", None) or type(exc).__qualname__
    text = str(exc) if isinstance(exc, BaseException) else repr(exc)
    kernel, _, _spec = label.partition("|")
    message = (
        f"polykernel numba_kernel '{kernel}': the kernel raised {name}: {text}. "
        f"Outputs are undefined; fix the kernel or its inputs."
    )
    return create_error(api, message, abi.ERRC_INTERNAL)


def _describe(spec: str) -> tuple[list[str], list[str], list[str]]:
    ins, outs, attrs = (part.split(",") if part else [] for part in spec.split(";"))
    return ins, outs, attrs


def _attribute_name(address: int, length: int) -> str:
    raw = ctypes.string_at(address, length) if length else b""
    return raw.decode("utf-8", "replace")


def _what(kind: int, a: int, b: int, c: int, ins, outs, attrs) -> str:
    """The "what went wrong" part for each check kind (see ffi.handler_ir.checks)."""
    if kind == 0:
        return (
            f"expected {len(ins)} inputs, {len(outs)} outputs and {len(attrs)} "
            f"attributes, got {a}, {b} and {c}"
        )
    if kind in (1, 2):
        role, specs = ("input", ins) if kind == 1 else ("output", outs)
        return (
            f"{role} {a} must be {specs[a]} (dtype[rank], plus the same leading "
            f"batch dims as every other buffer under vmap), got "
            f"{abi.dtype_name(b)} of rank {c}"
        )
    if kind == 3:
        if b != abi.ATTR_TYPE_SCALAR:  # the dtype word of a non-scalar is junk
            what = _ATTR_KINDS.get(b, f"an attribute of type {b}")
            return f"attribute {attrs[a]} must be a scalar of that dtype, got {what}"
        return (
            f"attribute {attrs[a]} must be a scalar of that dtype, got a scalar "
            f"of dtype {abi.dtype_name(c)}"
        )
    if kind == 4:
        return (
            f"batch dimensions of input {a} do not broadcast against the outputs' "
            f"(batch dim {b} has size {c}; it must be 1 or the outputs' size)"
        )
    if kind == 5:
        return (
            f"input {a} ({ins[a]}) carries {b} leading batch dims but the outputs "
            f"carry {c}; a buffer's rank must be its built rank plus the same "
            f"number of batch dims for every buffer"
        )
    if kind == 6:
        return (
            f"attribute {a} must be named '{attrs[a].split(':')[0]}' (attributes: "
            f"{', '.join(attrs)}), got '{_attribute_name(b, c)}'"
        )
    if kind == 7:
        return f"could not allocate {a} bytes for float32 copies of half buffers"
    return (
        f"batch dimensions of output {a} differ from output 0's (batch dim {b} "
        f"has size {c})"
    )


def handler_error(api: int, label: str, kind: int, a: int, b: int, c: int) -> int:
    """Error for a call frame that does not match what the handler was built for.

    ``label`` is ``"<kernel>|<in specs>;<out specs>;<attr specs>"`` (each spec like
    ``float32[2]`` or ``alpha:float32``); ``kind`` picks the check that failed and
    ``a, b, c`` are its numbers (see :mod:`polykernel.ffi.handler_ir.checks`).
    """
    kernel, _, spec = label.partition("|")
    ins, outs, attrs = _describe(spec)
    what = _what(kind, a, b, c, ins, outs, attrs)
    message = (
        f"polykernel numba_kernel '{kernel}': {what}. Call the kernel with arrays "
        f"matching the signature it was built for (pass a new numba_kernel for "
        f"another signature)."
    )
    errc = abi.ERRC_INTERNAL if kind == 7 else abi.ERRC_INVALID_ARGUMENT
    return create_error(api, message, errc)
