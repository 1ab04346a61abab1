"""Check a call against a Warp kernel's parameters (counts, dtypes, ranks, scalars).

Every message names the kernel, the parameter, what was expected and what came;
all checks run at trace time (shapes are static), so the handler never sees a call
its kernel was not built for. Scalar values themselves go through the one refusing
converter (:mod:`polykernel.contract.scalars`) with the dtype declared here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import KernelRegistrationError, KernelTypeError
from .plan import MAX_ARRAY_BYTES, KernelPlan, array_shape

__all__ = ["check_arrays", "check_scalar_names", "scalar_dtype"]


def check_arrays(
    name: str, plan: KernelPlan, args: Sequence[Any], outs: Sequence[Any]
) -> list[tuple[int, ...]]:
    """Check inputs and outputs against the kernel's array parameters in order;
    return the input shapes.

    Raises:
        KernelRegistrationError: wrong number of arrays, or an array too large for
            Warp's 32-bit strides.
        KernelTypeError: a dtype or rank differs from the parameter's.
    """
    arrays = plan.arrays
    if len(args) + len(outs) != len(arrays):
        labels = ", ".join(a.label for a in arrays)
        raise KernelRegistrationError(
            f"warp_kernel '{name}': the kernel has {len(arrays)} array parameters "
            f"({labels}) for the inputs then the outputs, but the call passes "
            f"{len(args)} inputs and declares {len(outs)} outputs."
        )
    shapes = []
    for k, (param, value) in enumerate(zip(arrays, [*args, *outs], strict=True)):
        what = f"input {k}" if k < len(args) else f"output {k - len(args)}"
        shape, dtype = tuple(value.shape), np.dtype(value.dtype).name
        if k < len(args):
            shapes.append(shape)
        if dtype != param.dtype:
            raise KernelTypeError(
                f"warp_kernel '{name}': {what} has dtype {dtype} but parameter "
                f"'{param.label}' is an array of {param.dtype}; cast the array or "
                f"annotate the parameter with pk.jaxinfo_to_warpinfo(...)."
            )
        if len(array_shape(shape)) != param.ndim:
            raise KernelTypeError(
                f"warp_kernel '{name}': {what} has shape {shape} (rank {len(shape)}) "
                f"but parameter '{param.label}' is a {param.ndim}-d array."
            )
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if nbytes > MAX_ARRAY_BYTES:
            raise KernelRegistrationError(
                f"warp_kernel '{name}': {what} holds {nbytes} bytes; Warp arrays are "
                f"limited to {MAX_ARRAY_BYTES} bytes (32-bit strides). Split the "
                f"work into smaller calls."
            )
    return shapes


def check_scalar_names(name: str, plan: KernelPlan, attrs: Mapping[str, Any]) -> None:
    """Refuse a call whose keywords are not exactly the kernel's scalar parameters.

    Raises:
        KernelRegistrationError: a scalar parameter is missing, or a keyword names
            no scalar parameter.
    """
    wanted = {a.label for a in plan.scalars}
    missing = sorted(wanted - set(attrs))
    extra = sorted(set(attrs) - wanted)
    if missing or extra:
        raise KernelRegistrationError(
            f"warp_kernel '{name}': scalar parameters are passed as keywords; the "
            f"kernel takes {sorted(wanted) or 'none'}, missing {missing or 'none'}, "
            f"unexpected {extra or 'none'}."
        )


def scalar_dtype(name: str, plan: KernelPlan, key: str) -> str:
    """The declared dtype of scalar parameter ``key`` (its annotation).

    Raises:
        KernelTypeError: the parameter is float16, which XLA attributes cannot carry.
    """
    dtype = next(a.dtype for a in plan.scalars if a.label == key)
    if dtype == "float16":
        raise KernelTypeError(
            f"warp_kernel '{name}': scalar parameter '{key}' is float16, which "
            f"XLA attributes cannot carry; use float32 for scalar parameters."
        )
    return dtype
