"""A Python XLA FFI handler for CUDA: decode the call frame, hand over the stream.

:func:`numba_cuda_callable` runs an arbitrary Python function that launches Numba
kernels itself, so its GPU handler has to run Python: this module builds it as a
ctypes callback. It answers XLA's metadata query (FFI API version, no traits: a
Python handler must not be recorded in a CUDA graph), and on execution decodes
every buffer (dtype, shape, device pointer) and XLA's stream, then calls
``call(inputs, outputs, stream)``. A Python exception becomes an ``XLA_FFI_Error``
carrying its type and message. Offsets come from :mod:`polykernel.ffi.abi`, so the
handler is checked here with a hand-built frame (``tests/support/ffi_frames.py``).

Example:
    >>> from polykernel.backends.numba_cuda.host_handler import make_host_handler
    >>> from polykernel.ffi import targets
    >>> h = make_host_handler("doc.host", lambda ins, outs, stream: None)
    >>> targets.register("doc.host", h.address, platform="CUDA", identity="doc.host",
    ...                  backend="numba_cuda", owner=h)
    True
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...ffi import abi
from ...ffi._pyerror import create_error

__all__ = ["DeviceBuffer", "HostHandler", "make_host_handler"]

_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_STREAM_GET = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_STREAM_ARGS_SIZE = 32  # XLA_FFI_Stream_Get_Args: size, extension, ctx, stream
_STREAM_ARGS_STREAM = 24


@dataclass(frozen=True)
class DeviceBuffer:
    """One buffer of a call: dtype name, shape and device address."""

    dtype: str
    shape: tuple[int, ...]
    data: int


@dataclass(frozen=True)
class HostHandler:
    """The ctypes handler (kept alive by this object) and its address."""

    name: str
    callback: Any
    address: int

    def capsule(self) -> Any:
        import jax

        return jax.ffi.pycapsule(self.address)


def _ptr(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


def _buffers(frame: int, lay: dict[str, int], size_key: str, key: str) -> list:
    count = ctypes.c_int64.from_address(frame + lay[size_key]).value
    table = _ptr(frame + lay[key])
    out = []
    for i in range(count):
        buf = _ptr(table + 8 * i)
        rank = ctypes.c_int64.from_address(buf + lay["BUFFER_RANK"]).value
        dims = _ptr(buf + lay["BUFFER_DIMS"])
        shape = tuple(ctypes.c_int64.from_address(dims + 8 * d).value
                      for d in range(rank))  # fmt: skip
        code = ctypes.c_int32.from_address(buf + lay["BUFFER_DTYPE"]).value
        out.append(DeviceBuffer(abi.dtype_name(code), shape,
                                _ptr(buf + lay["BUFFER_DATA"])))  # fmt: skip
    return out


def _stream(frame: int, api: int, lay: dict[str, int]) -> int:
    args = (ctypes.c_char * _STREAM_ARGS_SIZE)()
    ctypes.c_size_t.from_buffer(args, 0).value = _STREAM_ARGS_SIZE
    ctypes.c_void_p.from_buffer(args, 16).value = _ptr(frame + lay["FRAME_CTX"])
    error = _STREAM_GET(_ptr(api + lay["API_STREAM_GET"]))(ctypes.addressof(args))
    if error:
        raise RuntimeError("XLA could not give the handler its CUDA stream")
    return ctypes.c_void_p.from_buffer(args, _STREAM_ARGS_STREAM).value or 0


def _answer_metadata(extension: int, lay: dict[str, int]) -> None:
    metadata = _ptr(extension + lay["METADATA_EXT_METADATA"])
    major, minor = abi.installed_api_version()
    ctypes.c_int32.from_address(metadata + lay["METADATA_MAJOR"]).value = major
    ctypes.c_int32.from_address(metadata + lay["METADATA_MINOR"]).value = minor
    ctypes.c_uint32.from_address(metadata + lay["METADATA_TRAITS"]).value = 0


def make_host_handler(
    name: str, call: Callable[[list[DeviceBuffer], list[DeviceBuffer], int], None]
) -> HostHandler:
    """Build the handler of FFI target ``name`` around ``call``."""
    lay = abi.layout()

    @_HANDLER
    def handler(frame: int) -> int:
        api = _ptr(frame + lay["FRAME_API"])
        try:
            extension = _ptr(frame + lay["FRAME_EXTENSION"])
            if extension and (
                ctypes.c_int32.from_address(extension + lay["EXT_TYPE"]).value
                == abi.EXT_TYPE_METADATA
            ):
                _answer_metadata(extension, lay)
                return 0
            stage = ctypes.c_int32.from_address(frame + lay["FRAME_STAGE"]).value
            if stage != abi.STAGE_EXECUTE:
                return 0
            ins = _buffers(frame, lay, "FRAME_ARGS_SIZE", "FRAME_ARGS")
            outs = _buffers(frame, lay, "FRAME_RETS_SIZE", "FRAME_RETS")
            call(ins, outs, _stream(frame, api, lay))
            return 0
        except Exception as err:  # a Python error must not cross into XLA
            return create_error(
                api, f"{name}: the function raised {type(err).__name__}: {err}"
            )

    address = ctypes.cast(handler, ctypes.c_void_p).value or 0
    return HostHandler(name, handler, address)
