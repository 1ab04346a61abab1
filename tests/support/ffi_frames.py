"""Call an XLA FFI handler with a hand-built execute frame (no XLA, no GPU).

Tests use it to drive a native handler through its decoding, lookup and checks on a
machine without a GPU: buffers are plain numbers (never dereferenced by the paths
tested), the stream getter returns a fake stream, and every ``XLA_FFI_Error`` the
handler creates is captured as its message. Offsets come from ``polykernel.ffi.abi``.
"""

from __future__ import annotations

import ctypes

from polykernel.ffi import abi

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_ARG_BUFFER, _ATTR_STRING = 1, 4
_STREAM_GET_ARGS_STREAM = 24  # XLA_FFI_Stream_Get_Args.stream


def call_handler(address, buffers, attrs, n_in):
    """Run the handler at ``address``; return its error message, or None on success.

    ``buffers``: ``(dtype_code, shape, data_address)`` per input, then per output.
    ``attrs``: ``{name: str}`` string attributes.
    """
    lay = abi.layout()
    keep: list = []
    messages: list[str] = []

    def block(size: int) -> ctypes.Array:
        buf = (ctypes.c_char * size)()
        keep.append(buf)
        return buf

    def put(buf, offset, ctype, value):
        ctype.from_buffer(buf, offset).value = value

    @_CALLBACK
    def error_create(args):
        text = ctypes.c_char_p.from_address(args + lay["ERROR_CREATE_ARGS_MESSAGE"])
        messages.append((text.value or b"").decode("utf-8", "replace"))
        return 1

    @_CALLBACK
    def stream_get(args):
        ctypes.c_void_p.from_address(args + _STREAM_GET_ARGS_STREAM).value = 0x5EED
        return None

    keep += [error_create, stream_get]
    api = block(lay["API_STRUCT_SIZE"])
    put(api, 0, ctypes.c_size_t, lay["API_STRUCT_SIZE"])
    put(
        api,
        lay["API_ERROR_CREATE"],
        ctypes.c_void_p,
        ctypes.cast(error_create, ctypes.c_void_p).value,
    )
    put(
        api,
        lay["API_STREAM_GET"],
        ctypes.c_void_p,
        ctypes.cast(stream_get, ctypes.c_void_p).value,
    )

    def buffer(dtype, shape, data):
        b = block(lay["BUFFER_DIMS"] + 8)
        dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        keep.append(dims)
        put(b, lay["BUFFER_DTYPE"], ctypes.c_int32, dtype)
        put(b, lay["BUFFER_DATA"], ctypes.c_void_p, data)
        put(b, lay["BUFFER_RANK"], ctypes.c_int64, len(shape))
        put(b, lay["BUFFER_DIMS"], ctypes.c_void_p, ctypes.addressof(dims))
        return ctypes.addressof(b)

    def array(ctype, values):
        arr = (ctype * max(len(values), 1))(*values)
        keep.append(arr)
        return ctypes.addressof(arr)

    def span(text: bytes):
        s = block(16)
        raw = ctypes.create_string_buffer(text, len(text))
        keep.append(raw)
        put(s, lay["BYTESPAN_PTR"], ctypes.c_void_p, ctypes.addressof(raw))
        put(s, lay["BYTESPAN_LEN"], ctypes.c_size_t, len(text))
        return ctypes.addressof(s)

    bufs = [buffer(*b) for b in buffers]
    frame = block(lay["FRAME_STRUCT_SIZE"] + 8)
    put(frame, 0, ctypes.c_size_t, lay["FRAME_STRUCT_SIZE"])
    put(frame, lay["FRAME_API"], ctypes.c_void_p, ctypes.addressof(api))
    put(frame, lay["FRAME_STAGE"], ctypes.c_int32, abi.STAGE_EXECUTE)
    for size_key, types_off, ptrs_key, items in (
        ("FRAME_ARGS_SIZE", lay["FRAME_ARG_TYPES"], "FRAME_ARGS", bufs[:n_in]),
        ("FRAME_RETS_SIZE", lay["FRAME_RETS_SIZE"] + 8, "FRAME_RETS", bufs[n_in:]),
    ):
        put(frame, lay[size_key], ctypes.c_int64, len(items))
        put(
            frame,
            types_off,
            ctypes.c_void_p,
            array(ctypes.c_int32, [_ARG_BUFFER] * len(items)),
        )
        put(frame, lay[ptrs_key], ctypes.c_void_p, array(ctypes.c_void_p, items))
    names = [span(k.encode()) for k in attrs]
    values = [span(v.encode()) for v in attrs.values()]
    put(frame, lay["FRAME_ATTRS_SIZE"], ctypes.c_int64, len(attrs))
    put(
        frame,
        lay["FRAME_ATTR_TYPES"],
        ctypes.c_void_p,
        array(ctypes.c_int32, [_ATTR_STRING] * len(attrs)),
    )
    put(frame, lay["FRAME_ATTR_NAMES"], ctypes.c_void_p, array(ctypes.c_void_p, names))
    put(frame, lay["FRAME_ATTRS"], ctypes.c_void_p, array(ctypes.c_void_p, values))
    result = _HANDLER(address)(ctypes.addressof(frame))
    if result:
        return messages[-1] if messages else "(error without a message)"
    return None
