"""A Triton kernel's signature and launch parameters (pure: no Triton, no JAX).

A ``@triton.jit`` function used with :func:`~polykernel.triton_kernel` takes, in
order, one pointer per input, one per output, then scalars and ``tl.constexpr``
parameters. For Triton's compiler that becomes a *signature* (``{name: "*fp32" |
"i32" | "constexpr" | ...}``) plus the constexpr values; for ``cuLaunchKernel`` it
becomes the compiled entry's parameter list, which is Triton's rule:

* every non-constexpr parameter, in order (constexprs are compiled in and removed);
  pointers are 8 bytes, scalars have the width of the entry's ``.param`` (``i1`` is
  one byte, ``.u8``: Triton's launcher stores it in an ``int32`` of which the driver
  reads the first byte; floats keep their own width);
* then the pointers Triton appends to every kernel: the global scratch buffer and
  the profile scratch buffer (null when the kernel needs none).

:func:`launch_params` writes that list as :class:`~polykernel.launcher.layout.Param` for
the native launcher; ``tests/backends/triton/test_params.py`` pins it and the slow test
compares it with the ``.param`` list of the PTX Triton produces.

Example:
    >>> from polykernel.backends.triton.params import build_signature, launch_params
    >>> sig = build_signature("add", ["x", "out", "n", "BLOCK"], {"BLOCK"},
    ...                       ["float32", "float32"], {"n": 8}, {"BLOCK": 4})
    >>> sig.signature
    {'x': '*fp32', 'out': '*fp32', 'n': 'i32', 'BLOCK': 'constexpr'}
    >>> [p.size for p in launch_params(sig, n_buffers=2)]
    [8, 8, 4, 8, 8]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import KernelRegistrationError, KernelTypeError
from ...launcher.layout import Param, constant, pointer

__all__ = [
    "POINTER_ALIGN",
    "POINTER_DTYPES",
    "SCALAR_STORAGE",
    "TritonSignature",
    "build_signature",
    "launch_params",
    "pointer_type",
    "scalar_dtype",
    "scalar_type",
]

#: Pointer alignment we promise Triton (``tt.divisibility``); XLA's buffers are at
#: least this aligned, and the launcher checks it on every launch.
POINTER_ALIGN = 16

_TRITON_OF_DTYPE = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64",
}  # fmt: skip
#: The buffer dtypes a Triton kernel takes (a pointer type of each).
POINTER_DTYPES = tuple(_TRITON_OF_DTYPE)
#: The NumPy dtype of the bytes a scalar of each Triton type is passed as.
SCALAR_STORAGE = {
    "i1": "uint8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "fp16": "float16", "fp32": "float32", "fp64": "float64",
}  # fmt: skip


def pointer_type(dtype: str) -> str:
    """Triton's pointer type for a buffer of NumPy dtype name ``dtype``.

    Example:
        >>> from polykernel.backends.triton.params import pointer_type
        >>> pointer_type("float32")
        '*fp32'
    """
    try:
        return "*" + _TRITON_OF_DTYPE[dtype]
    except KeyError:
        raise KernelRegistrationError(
            f"triton_kernel: buffers of dtype {dtype} are not supported; use one of "
            f"{', '.join(_TRITON_OF_DTYPE)}."
        ) from None


def scalar_dtype(value: Any) -> np.dtype | None:
    """The dtype Triton's own launcher gives a scalar argument (None: it has none).

    Python ``bool`` -> bool (``i1``); ``int`` -> int32, else int64, else uint64 (an
    int beyond uint64 is int64, which the converter then refuses as out of range);
    ``float`` -> float32; a NumPy scalar keeps its dtype when Triton has it.
    """
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, bool | np.bool_):
        return np.dtype(bool)
    if isinstance(value, np.generic):
        name = value.dtype.name
        if name in _TRITON_OF_DTYPE and _TRITON_OF_DTYPE[name] in SCALAR_STORAGE:
            return value.dtype
        return None
    if isinstance(value, int):
        if -(2**31) <= value < 2**31:
            return np.dtype("int32")
        if value >= 2**63 and value < 2**64:
            return np.dtype("uint64")
        return np.dtype("int64")
    if isinstance(value, float):
        return np.dtype("float32")
    return None


def scalar_type(kernel: str, name: str, value: Any) -> str:
    """Triton's type (``"fp32"``, ``"i1"``...) of a converted scalar argument.

    Raises:
        KernelTypeError: not a bool, int, float or NumPy scalar Triton has.
    """
    dtype = scalar_dtype(value)
    if dtype is None:
        raise KernelTypeError(
            f"triton_kernel '{kernel}': scalar argument '{name}' must be a bool, int, "
            f"float or NumPy scalar (not bfloat16), got {type(value).__name__}: "
            f"{value!r}. Pass it as a keyword of the call, or as a tl.constexpr."
        )
    return _TRITON_OF_DTYPE[dtype.name]


@dataclass(frozen=True)
class TritonSignature:
    """What Triton compiles and what the launch passes.

    Attributes:
        kernel: the kernel's name (for messages).
        signature: every parameter's Triton type (``"constexpr"`` for constexprs).
        constexprs: the compile-time values, by name.
        scalars: the runtime scalars in parameter order: ``(name, type, value)``.
        n_buffers: how many leading parameters are buffer pointers.
    """

    kernel: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    scalars: tuple[tuple[str, str, Any], ...]
    n_buffers: int
    attrs: dict[tuple[int, ...], list[list[Any]]] = field(default_factory=dict)


def build_signature(
    kernel: str,
    arg_names: Sequence[str],
    constexpr_names: Collection[str],
    buffer_dtypes: Sequence[str],
    scalars: Mapping[str, Any],
    constexprs: Mapping[str, Any],
) -> TritonSignature:
    """Match a kernel's parameters with buffers, call scalars and constexprs.

    Args:
        kernel: the kernel's name, for messages.
        arg_names: the kernel's parameter names, in order.
        constexpr_names: those annotated ``tl.constexpr``.
        buffer_dtypes: dtype names of the inputs, then the outputs.
        scalars: keywords of the call, by name.
        constexprs: keywords given to ``triton_kernel``; each fills a constexpr or,
            for a plain parameter, a fixed scalar (a call keyword wins).

    Raises:
        KernelRegistrationError: a buffer lands on a constexpr, a parameter has no
            value, or a keyword names no parameter.
    """
    n = len(buffer_dtypes)
    if len(arg_names) < n or any(a in constexpr_names for a in arg_names[:n]):
        raise KernelRegistrationError(
            f"triton_kernel '{kernel}': the kernel's first {n} parameters must be "
            f"pointers, one per input then one per output; its parameters are "
            f"({', '.join(arg_names)}) with constexprs {sorted(constexpr_names)}."
        )
    unknown = sorted(k for k in {*scalars, *constexprs} if k not in arg_names[n:])
    if unknown:
        raise KernelRegistrationError(
            f"triton_kernel '{kernel}': keyword(s) {unknown} name no scalar or "
            f"constexpr parameter; after the {n} buffers the kernel takes "
            f"({', '.join(arg_names[n:])})."
        )
    pairs = zip(arg_names[:n], buffer_dtypes, strict=True)
    signature = {a: pointer_type(d) for a, d in pairs}
    consts, runtime = {}, []
    for name in arg_names[n:]:
        if name in constexpr_names:
            if name in scalars:
                consts[name] = scalars[name]
            elif name in constexprs:
                consts[name] = constexprs[name]
            else:
                _missing(kernel, name, "tl.constexpr")
            signature[name] = "constexpr"
        else:
            # A plain parameter given to triton_kernel(...) is a fixed scalar.
            if name not in scalars and name not in constexprs:
                _missing(kernel, name, "scalar")
            value = scalars[name] if name in scalars else constexprs[name]
            signature[name] = scalar_type(kernel, name, value)
            runtime.append((name, signature[name], value))
    attrs = {(i,): [["tt.divisibility", POINTER_ALIGN]] for i in range(n)}
    return TritonSignature(kernel, signature, consts, tuple(runtime), n, attrs)


def _missing(kernel: str, name: str, kind: str) -> None:
    where = (
        "to triton_kernel(...) or to the call"
        if kind == "tl.constexpr"
        else ("as a keyword of the call")
    )
    raise KernelRegistrationError(
        f"triton_kernel '{kernel}': {kind} parameter '{name}' has no value; pass "
        f"{name}=... {where}."
    )


def launch_params(
    sig: TritonSignature,
    n_buffers: int,
    global_scratch: int | None = None,
    profile_scratch: int | None = None,
) -> tuple[Param, ...]:
    """The compiled entry's parameters: buffers, scalars, then the two scratches.

    Args:
        sig: from :func:`build_signature`.
        n_buffers: the launch's buffers (``sig.n_buffers``, plus a scratch output).
        global_scratch, profile_scratch: the buffer backing each scratch pointer,
            or None for a null pointer (the kernel needs none).
    """
    params = [pointer(i, POINTER_ALIGN) for i in range(sig.n_buffers)]
    for _name, triton, value in sig.scalars:
        storage = SCALAR_STORAGE[triton]
        params.append(constant(bool(value) if triton == "i1" else value, storage))
    for buffer in (global_scratch, profile_scratch):
        if buffer is not None and not sig.n_buffers <= buffer < n_buffers:
            raise ValueError(f"scratch buffer {buffer} is not an extra buffer")
        params.append(constant(0, "uint64") if buffer is None else pointer(buffer))
    return tuple(params)
