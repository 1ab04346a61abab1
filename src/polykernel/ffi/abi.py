"""The XLA FFI C ABI as plain numbers, keyed by the FFI API version jaxlib reports.

This is the only place that knows the layout of ``xla/ffi/api/c_api.h`` (x86-64 /
aarch64, LP64). What can be read at run time is read: the API version comes from
``XLA_FFI_API_MAJOR``/``XLA_FFI_API_MINOR`` in the installed jaxlib's own header.
What cannot (struct offsets) is a table per known API version; an unknown version is
refused with :class:`~polykernel.errors.BackendUnavailableError` that says which
jax/jaxlib to install, before any handler could read a wrong offset.
``tests/ffi/test_abi.py`` compiles a probe against the installed headers and checks
every entry of the running version's table.

Two kinds of names live here:

* version-independent enum values (dtype codes, error codes, stages, the version a
  Numba handler reports): plain module constants;
* layout facts (``FRAME_*``, ``BUFFER_*``, ``METADATA_*``, ``API_*``, ...): looked up
  on first access for the installed version (``abi.FRAME_API`` works as a module
  constant, and fails cleanly on an unknown jaxlib).

Nothing here imports JAX or Numba.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = [
    "API_MAJOR",
    "API_MINOR",
    "DTYPE_CODES",
    "ERRC_INTERNAL",
    "ERRC_INVALID_ARGUMENT",
    "JAX_REQUIREMENT",
    "SUPPORTED_VERSIONS",
    "TRAIT_COMMAND_BUFFER_COMPATIBLE",
    "dtype_code",
    "dtype_name",
    "ffi_header",
    "installed_api_version",
    "layout",
    "layout_for",
]

# The version every polykernel CPU handler (Numba, C++, Warp) reports in the metadata
# handshake. jaxlib 0.10 accepts 0.1-0.3, 0.11 accepts up to 0.4 and 0.12 up to 0.5,
# so 0.3 is the newest version every supported jaxlib understands: a library built
# against a newer jaxlib's headers still loads on an older line (a bundle moves between
# lines). A handler that reports nothing (0.0) is refused. C++ handlers take it from
# PK_FFI_API_MIN_MINOR in polykernel.h (a test keeps the two in step).
API_MAJOR = 0
API_MINOR = 3

# FFI API version (major, minor) -> the jaxlib line that ships it.
SUPPORTED_VERSIONS: dict[tuple[int, int], str] = {
    (0, 3): "jaxlib 0.10",
    (0, 4): "jaxlib 0.11",
    (0, 5): "jaxlib 0.12",
}
JAX_REQUIREMENT = "jax and jaxlib >=0.10,<0.13"

STAGE_EXECUTE = 3  # XLA_FFI_ExecutionStage_EXECUTE
EXT_TYPE_METADATA = 1  # XLA_FFI_Extension_Metadata
ATTR_TYPE_SCALAR = 3  # XLA_FFI_AttrType_SCALAR
ARG_TYPE_BUFFER = 1  # XLA_FFI_ArgType_BUFFER
TRAIT_COMMAND_BUFFER_COMPATIBLE = 1  # XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE

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

# Layout of API 0.3 (printed with offsetof against the jaxlib 0.10.2 headers). Later
# versions renamed types (XLA_FFI_InternalExtension, XLA_FFI_InvokeContext) and only
# appended to XLA_FFI_Api; each version's table is checked by the probe test.
_LAYOUT_0_3: dict[str, int] = {
    # XLA_FFI_CallFrame
    "FRAME_STRUCT_SIZE": 168,  # XLA_FFI_CallFrame_STRUCT_SIZE (up to attrs)
    "FRAME_EXTENSION": 8,  # extension_start (metadata query when its type == 1)
    "FRAME_API": 16,  # const XLA_FFI_Api*
    "FRAME_CTX": 24,  # XLA_FFI_ExecutionContext* / XLA_FFI_InvokeContext*
    "FRAME_STAGE": 32,  # int32 XLA_FFI_ExecutionStage
    "FRAME_ARGS_SIZE": 56,  # int64
    "FRAME_ARG_TYPES": 64,  # int32* (XLA_FFI_ArgType)
    "FRAME_ARGS": 72,  # void** -> XLA_FFI_Buffer*
    "FRAME_RETS_SIZE": 96,  # int64
    "FRAME_RETS": 112,  # void** -> XLA_FFI_Buffer*
    "FRAME_ATTRS_SIZE": 136,  # int64
    "FRAME_ATTR_TYPES": 144,  # int32* (XLA_FFI_AttrType)
    "FRAME_ATTR_NAMES": 152,  # XLA_FFI_ByteSpan**
    "FRAME_ATTRS": 160,  # void** -> XLA_FFI_Scalar* for scalar attributes
    # Extension header / XLA_FFI_Metadata_Extension / XLA_FFI_Metadata
    "EXT_TYPE": 8,  # int32
    "METADATA_EXT_SIZE": 32,  # XLA_FFI_Metadata_Extension_STRUCT_SIZE
    "METADATA_EXT_METADATA": 24,  # XLA_FFI_Metadata*
    "METADATA_SIZE": 36,  # XLA_FFI_Metadata_STRUCT_SIZE (up to traits)
    "METADATA_VERSION": 8,  # XLA_FFI_Api_Version, inside XLA_FFI_Metadata
    "METADATA_MAJOR": 24,  # int32, inside XLA_FFI_Metadata.api_version
    "METADATA_MINOR": 28,  # int32
    "METADATA_TRAITS": 32,  # uint32
    "METADATA_STATE_TYPE_ID": 40,  # int64
    "API_VERSION_SIZE": 24,  # XLA_FFI_Api_Version_STRUCT_SIZE
    # XLA_FFI_Buffer
    "BUFFER_DTYPE": 16,  # int32
    "BUFFER_DATA": 24,  # void*
    "BUFFER_RANK": 32,  # int64
    "BUFFER_DIMS": 40,  # int64*
    # XLA_FFI_Scalar, XLA_FFI_ByteSpan
    "SCALAR_DTYPE": 0,  # int32
    "SCALAR_VALUE": 8,  # void*
    "BYTESPAN_PTR": 0,
    "BYTESPAN_LEN": 8,
    # XLA_FFI_Api (function table) and XLA_FFI_Error_Create_Args
    "API_STRUCT_SIZE": 192,  # XLA_FFI_Api_STRUCT_SIZE
    "API_ERROR_CREATE": 48,  # XLA_FFI_Error_Create*
    "API_ERROR_DESTROY": 64,  # XLA_FFI_Error_Destroy*
    "API_STREAM_GET": 80,  # XLA_FFI_Stream_Get*
    "API_THREAD_POOL_SCHEDULE": 136,  # XLA_FFI_ThreadPool_Schedule*
    "API_THREAD_POOL_NUM_THREADS": 144,  # XLA_FFI_ThreadPool_NumThreads*
    "ERROR_CREATE_ARGS_SIZE": 28,  # offsetof(errc) + sizeof(int32)
    "ERROR_CREATE_ARGS_MESSAGE": 16,  # const char*
    "ERROR_CREATE_ARGS_ERRC": 24,  # int32
}
_LAYOUTS: dict[tuple[int, ...], dict[str, int]] = {
    (0, 3): _LAYOUT_0_3,
    # 0.4 appends XLA_FFI_InvokeContext_FindExtension to the API table.
    (0, 4): {**_LAYOUT_0_3, "API_STRUCT_SIZE": 200},
    # 0.5 appends XLA_FFI_CustomOptions_Get.
    (0, 5): {**_LAYOUT_0_3, "API_STRUCT_SIZE": 208},
}
LAYOUT_NAMES = frozenset(_LAYOUT_0_3)


def ffi_header() -> Path:
    """Path of the installed jaxlib's ``xla/ffi/api/c_api.h`` (jaxlib not imported).

    Example:
        >>> from polykernel.ffi.abi import ffi_header
        >>> ffi_header().name
        'c_api.h'
    """
    spec = importlib.util.find_spec("jaxlib")
    roots = list(spec.submodule_search_locations or []) if spec else []
    if not roots:
        raise _unsupported("jaxlib is not installed")
    return Path(roots[0]) / "include" / "xla" / "ffi" / "api" / "c_api.h"


def parse_api_version(header_text: str) -> tuple[int, int] | None:
    """``(major, minor)`` from the ``#define``s of a ``c_api.h``, or None.

    Example:
        >>> from polykernel.ffi.abi import parse_api_version
        >>> text = "#define XLA_FFI_API_MAJOR 0\\n#define XLA_FFI_API_MINOR 4"
        >>> parse_api_version(text)
        (0, 4)
    """
    found = dict(
        re.findall(r"#define\s+XLA_FFI_API_(MAJOR|MINOR)\s+(\d+)", header_text)
    )
    if "MAJOR" not in found or "MINOR" not in found:
        return None
    return int(found["MAJOR"]), int(found["MINOR"])


@functools.cache
def installed_api_version() -> tuple[int, int]:
    """The XLA FFI API version of the installed jaxlib, read from its header.

    Raises:
        BackendUnavailableError: the header is missing or names no version.

    Example:
        >>> from polykernel.ffi.abi import SUPPORTED_VERSIONS, installed_api_version
        >>> installed_api_version() in SUPPORTED_VERSIONS
        True
    """
    header = ffi_header()
    try:
        version = parse_api_version(header.read_text(errors="replace"))
    except OSError as err:
        raise _unsupported(f"cannot read jaxlib's FFI header {header}: {err}") from None
    if version is None:
        raise _unsupported(f"{header} defines no XLA_FFI_API_MAJOR/MINOR")
    return version


def layout_for(version: tuple[int, int]) -> dict[str, int]:
    """The layout table of FFI API ``version``.

    Raises:
        BackendUnavailableError: polykernel does not know this version.

    Example:
        >>> from polykernel.ffi.abi import layout_for
        >>> layout_for((0, 5))["FRAME_API"]
        16
    """
    table = _LAYOUTS.get(tuple(version))
    if table is None:
        known = ", ".join(
            f"{a}.{b} ({line})" for (a, b), line in SUPPORTED_VERSIONS.items()
        )
        raise _unsupported(
            f"the installed jaxlib speaks XLA FFI API {version[0]}.{version[1]}, which "
            f"this polykernel does not know (known: {known})"
        )
    return table


def layout() -> dict[str, int]:
    """The layout table of the installed jaxlib (see :func:`layout_for`).

    Example:
        >>> from polykernel.ffi.abi import layout
        >>> layout()["BUFFER_DATA"]
        24
    """
    return layout_for(installed_api_version())


def __getattr__(name: str) -> Any:
    # Layout facts resolve against the installed jaxlib on first use (PEP 562), so
    # importing this module never reads a file and never needs jaxlib.
    if name in LAYOUT_NAMES:
        value = layout()[name]
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _unsupported(what: str) -> Exception:
    from ..errors import BackendUnavailableError

    return BackendUnavailableError(
        f"polykernel.ffi: {what}. polykernel supports {JAX_REQUIREMENT}; install "
        f"them with: pip install 'jax>=0.10,<0.13' 'jaxlib>=0.10,<0.13'."
    )


def dtype_code(dtype: DTypeLike) -> int:
    """Return the XLA FFI ``XLA_FFI_DataType`` code of ``dtype``.

    Raises:
        TypeError: the dtype has no FFI buffer code polykernel supports.

    Example:
        >>> import numpy as np
        >>> from polykernel.ffi.abi import dtype_code
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
        >>> from polykernel.ffi.abi import dtype_name
        >>> dtype_name(11)
        'float32'
    """
    return _NAMES.get(int(code), f"code {int(code)}")
