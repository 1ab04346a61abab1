"""Ask a compiled FFI handler what it tells XLA at registration: version and traits.

XLA calls every handler once with a *metadata query* (a call frame whose extension
is ``XLA_FFI_Metadata_Extension``) and reads back the FFI API version the handler
was built for and its traits, e.g. ``COMMAND_BUFFER_COMPATIBLE`` (may be captured in
a CUDA graph). :func:`query_metadata` builds that frame in host memory and calls the
handler directly, so the answer can be checked on a machine without a GPU, for any
backend's handler (C++, CUDA, Numba). Errors the handler reports come back through a
fake ``XLA_FFI_Api`` whose only live entry is ``XLA_FFI_Error_Create``.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..errors import KernelRegistrationError
from . import abi

__all__ = ["HandlerMetadata", "query_metadata"]

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_FAKE_ERROR = 0x1  # any non-null pointer: the harness never dereferences it


@dataclass(frozen=True)
class HandlerMetadata:
    """What a handler answered: ``api_version`` (major, minor) and ``traits`` bits."""

    api_version: tuple[int, int]
    traits: int

    @property
    def command_buffer_compatible(self) -> bool:
        """True when XLA may record the handler into a command buffer (CUDA graph)."""
        return bool(self.traits & abi.TRAIT_COMMAND_BUFFER_COMPATIBLE)


def _buffer(size: int) -> ctypes.Array:
    return (ctypes.c_char * size)()  # zero-filled


def _put(
    buf: ctypes.Array, offset: int, ctype: type, value: int | None
) -> None:
    ctype.from_buffer(buf, offset).value = value


def _get(buf: ctypes.Array, offset: int, ctype: type) -> int:
    return ctype.from_buffer(buf, offset).value


def query_metadata(address: int) -> HandlerMetadata:
    """Call the FFI handler at ``address`` with a metadata query; return its answer.

    Raises:
        KernelRegistrationError: the handler answered with an error (its message is
            included), as XLA would refuse it at registration.

    Example:
        >>> import polykernel as pk
        >>> from polykernel.ffi.abi import API_MAJOR, API_MINOR
        >>> from polykernel.ffi.metadata import query_metadata
        >>> src = "void nothing(pk::Tensor& y) {}"  # any handler answers the query
        >>> mod = pk.load_cpp_inline("doc_metadata", src, ["nothing"])
        >>> meta = query_metadata(mod.nothing.handler_address)
        >>> meta.api_version == (API_MAJOR, API_MINOR)  # what every jaxlib reads
        True
    """
    lay = abi.layout()
    size_t, ptr, i32 = ctypes.c_size_t, ctypes.c_void_p, ctypes.c_int32
    frame = _buffer(lay["FRAME_STRUCT_SIZE"] + 8)
    extension = _buffer(lay["METADATA_EXT_SIZE"])
    metadata = _buffer(lay["METADATA_STATE_TYPE_ID"] + 8)
    api = _buffer(lay["API_STRUCT_SIZE"])
    messages: list[str] = []

    @_ERROR_CREATE
    def error_create(args: int) -> int:
        text = ctypes.c_char_p.from_address(args + lay["ERROR_CREATE_ARGS_MESSAGE"])
        messages.append((text.value or b"").decode("utf-8", "replace"))
        return _FAKE_ERROR

    _put(api, 0, size_t, lay["API_STRUCT_SIZE"])
    _put(api, lay["API_ERROR_CREATE"], ptr, ctypes.cast(error_create, ptr).value)
    _put(metadata, 0, size_t, len(metadata))
    _put(extension, 0, size_t, lay["METADATA_EXT_SIZE"])
    _put(extension, lay["EXT_TYPE"], i32, abi.EXT_TYPE_METADATA)
    _put(extension, lay["METADATA_EXT_METADATA"], ptr, ctypes.addressof(metadata))
    _put(frame, 0, size_t, lay["FRAME_STRUCT_SIZE"])
    _put(frame, lay["FRAME_EXTENSION"], ptr, ctypes.addressof(extension))
    _put(frame, lay["FRAME_API"], ptr, ctypes.addressof(api))
    _put(frame, lay["FRAME_STAGE"], i32, abi.STAGE_EXECUTE)
    result = _HANDLER(address)(ctypes.addressof(frame))
    if result:
        raise KernelRegistrationError(
            f"polykernel.ffi: the handler at {address:#x} refused the metadata query: "
            f"{messages[-1] if messages else '(no message)'}"
        )
    return HandlerMetadata(
        (
            _get(metadata, lay["METADATA_MAJOR"], i32),
            _get(metadata, lay["METADATA_MINOR"], i32),
        ),
        _get(metadata, lay["METADATA_TRAITS"], ctypes.c_uint32),
    )
