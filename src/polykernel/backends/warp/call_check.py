"""Check a call against a Warp kernel's parameters (counts, dtypes, ranks, scalars).

Every message names the kernel, the parameter, what was expected and what came;
all checks run at trace time (shapes are static), so the handler never sees a call
its kernel was not built for. The scalar parameters are declared here (their
annotations); the core binds a call's keywords to them and converts each value
through the one refusing converter (:mod:`polykernel.contract.scalars`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...contract.parameters import Parameters
from ...errors import KernelRegistrationError, KernelTypeError
from .plan import MAX_ARRAY_BYTES, KernelPlan, array_shape

__all__ = ["check_arrays", "declared_scalars"]


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


def declared_scalars(name: str, plan: KernelPlan) -> Parameters:
    """The kernel's scalar parameters with their annotated dtypes (in order).

    Raises:
        KernelTypeError: a scalar parameter is float16, which XLA attributes cannot
            carry.
    """
    for a in plan.scalars:
        if a.dtype == "float16":
            raise KernelTypeError(
                f"warp_kernel '{name}': scalar parameter '{a.label}' is float16, "
                f"which XLA attributes cannot carry; use float32 for scalar "
                f"parameters."
            )
    return Parameters.declared({a.label: a.dtype for a in plan.scalars})
