"""The XLA FFI C ABI as plain numbers: struct offsets, type codes, the API version.

This is the only place that knows the layout of ``xla/ffi/api/c_api.h`` (x86-64 /
aarch64, LP64). The offsets were printed with ``offsetof`` against the jaxlib 0.10.2
headers and are unchanged in jaxlib 0.12 (fields were renamed there, not moved);
``tests/test_ffi_abi.py`` re-checks them against the installed headers.

Nothing here imports JAX or Numba, so generated handlers and the Python side share
one set of constants.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "API_MAJOR",
    "API_MINOR",
    "DTYPE_CODES",
    "ERRC_INTERNAL",
    "ERRC_INVALID_ARGUMENT",
    "dtype_code",
    "dtype_name",
]

# The version a handler reports in the metadata handshake. jaxlib 0.10 accepts
# 0.1-0.3 (its header says minor 3) and jaxlib 0.12 accepts 0.1-0.5, so 0.3 is the
# newest version both understand; a handler that reports nothing (0.0) is refused.
API_MAJOR = 0
API_MINOR = 3

# XLA_FFI_CallFrame
FRAME_EXTENSION = 8  # XLA_FFI_Extension_Base* (metadata query when type == 1)
FRAME_API = 16  # const XLA_FFI_Api*
FRAME_STAGE = 32  # int32 XLA_FFI_ExecutionStage
FRAME_ARGS_SIZE = 56  # int64
FRAME_ARGS = 72  # void** -> XLA_FFI_Buffer*
FRAME_RETS_SIZE = 96  # int64
FRAME_RETS = 112  # void** -> XLA_FFI_Buffer*
FRAME_ATTRS_SIZE = 136  # int64
FRAME_ATTR_TYPES = 144  # int32* (XLA_FFI_AttrType)
FRAME_ATTRS = 160  # void** -> XLA_FFI_Scalar* for scalar attributes

STAGE_EXECUTE = 3

# XLA_FFI_Extension_Base / XLA_FFI_Metadata_Extension / XLA_FFI_Metadata
EXT_TYPE = 8  # int32
EXT_TYPE_METADATA = 1
METADATA_EXT_METADATA = 24  # XLA_FFI_Metadata*
METADATA_MAJOR = 24  # int32, inside XLA_FFI_Metadata.api_version
METADATA_MINOR = 28  # int32
METADATA_TRAITS = 32  # uint32

# XLA_FFI_Buffer
BUFFER_DTYPE = 16  # int32
BUFFER_DATA = 24  # void*
BUFFER_RANK = 32  # int64
BUFFER_DIMS = 40  # int64*

# XLA_FFI_Scalar and attribute type tags
SCALAR_DTYPE = 0  # int32
SCALAR_VALUE = 8  # void*
ATTR_TYPE_SCALAR = 3

# XLA_FFI_Api and XLA_FFI_Error_Create_Args
API_ERROR_CREATE = 48  # XLA_FFI_Error_Create*
ERROR_CREATE_ARGS_SIZE = 28  # XLA_FFI_STRUCT_SIZE: offsetof(errc) + sizeof(int32)

ERRC_INVALID_ARGUMENT = 3
ERRC_INTERNAL = 13

# XLA_FFI_DataType codes for every dtype NumPy (with ml_dtypes) can view.
DTYPE_CODES: dict[str, int] = {
    "bool": 1,
    "int8": 2,
    "int16": 3,
    "int32": 4,
    "int64": 5,
    "uint8": 6,
    "uint16": 7,
    "uint32": 8,
    "uint64": 9,
    "float16": 10,
    "float32": 11,
    "float64": 12,
    "complex64": 15,
    "bfloat16": 16,
    "complex128": 18,
}
_NAMES = {code: name for name, code in DTYPE_CODES.items()}


def dtype_code(dtype: object) -> int:
    """Return the XLA FFI ``XLA_FFI_DataType`` code of ``dtype``.

    Raises:
        TypeError: the dtype has no FFI buffer code polykernel supports.

    Example:
        >>> import numpy as np
        >>> dtype_code(np.float32)
        11
    """
    name = np.dtype(dtype).name
    try:
        return DTYPE_CODES[name]
    except KeyError:
        raise TypeError(
            f"polykernel.ffi: dtype {name} cannot cross the XLA FFI boundary; "
            f"supported dtypes: {', '.join(DTYPE_CODES)}."
        ) from None


def dtype_name(code: int) -> str:
    """Name of an ``XLA_FFI_DataType`` code (``'code 42'`` when unknown).

    Example:
        >>> dtype_name(11)
        'float32'
    """
    return _NAMES.get(int(code), f"code {int(code)}")


# Added for the LLVM IR handlers (backends/_numba_*): attribute names, so a handler
# checks that each attribute has the name it was built for. XLA_FFI_Attrs.names is
# an XLA_FFI_ByteSpan** (one {const char* ptr; size_t len} per attribute).
FRAME_ATTR_NAMES = 152  # XLA_FFI_ByteSpan**
BYTESPAN_PTR = 0  # const char*
BYTESPAN_LEN = 8  # size_t
