"""Lowering Pallas kernels for a GPU, with or without one.

:func:`lowering_context` is what the ``pallas`` backend's protocol object returns
around a kernel's lowering (the primitive's lowering rule enters it);
:func:`lower_for_cuda` lowers any function for CUDA on a machine without a GPU.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable
from typing import Any

from ... import _jax_compat as jc
from ...contract.platform_context import lowering_for
from ...platforms import Platform

__all__ = ["AOT_GPU", "TRITON_TARGET", "lower_for_cuda", "lowering_context"]

#: The GPU a Pallas kernel is lowered for when no GPU is visible (ahead of time).
AOT_GPU = "NVIDIA H100 80GB HBM3"
_aot_gpu: contextvars.ContextVar[str] = contextvars.ContextVar(
    "polykernel_pallas_aot_gpu", default=AOT_GPU
)

#: The XLA custom-call target a Pallas kernel lowered through Triton becomes.
TRITON_TARGET = "__gpu$xla.gpu.triton"


def lowering_context(platform: str) -> contextlib.AbstractContextManager[Any]:
    """What lowering a Pallas kernel for ``platform`` needs around it.

    The lowering rule of ``XLACustomKernel`` enters it around a ``'pallas'``
    kernel. Pallas' Triton lowering asks JAX for the target GPU: with none visible,
    JAX 0.11+ fails where 0.10 assumed sm_90, so without a GPU (and without an
    abstract GPU in the current abstract mesh) the kernel is lowered for
    :data:`AOT_GPU` (or ``lower_for_cuda``'s ``device_kind``); with a GPU that is not
    JAX's default device, for that GPU. Set inside the rule,
    not around the whole program: JAX refuses an abstract mesh around programs
    whose primitives need devices to lower (sharded primitives do).
    """
    if platform != Platform.GPU:
        return contextlib.nullcontext()
    return jc.gpu_target_context(_aot_gpu.get())


def lower_for_cuda(
    fn: Callable[..., Any], *args: Any, device_kind: str = "NVIDIA H100 80GB HBM3"
) -> str:
    """Lower ``fn(*args)`` for CUDA, without a GPU; return the StableHLO text.

    ``args`` are arrays or ``jax.ShapeDtypeStruct``. Pallas kernels appear in the
    text as ``TRITON_TARGET`` custom calls carrying the Triton IR; compiling that IR
    to a cubin is XLA's job on a GPU, so this checks lowering, not code generation.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from polykernel import pallas_kernel
        >>> from polykernel.backends.pallas.lowering import (
        ...     TRITON_TARGET, lower_for_cuda,
        ... )
        >>> def double(x_ref, o_ref):
        ...     o_ref[...] = 2 * x_ref[...]
        >>> spec = jax.ShapeDtypeStruct((256,), jnp.float32)
        >>> TRITON_TARGET in lower_for_cuda(pallas_kernel(double, spec), spec)
        True
    """
    import jax

    check = jax.export.DisabledSafetyCheck.custom_call(TRITON_TARGET)
    token = _aot_gpu.set(device_kind)
    try:
        export = jax.export.export(
            jax.jit(fn), platforms=("cuda",), disabled_checks=[check]
        )
        with lowering_for("gpu"):
            try:
                # Pallas kernels called directly (not through a primitive) need
                # the abstract GPU around the whole program ...
                with jc.abstract_gpu_target(device_kind):
                    return export(*args).mlir_module()
            except ValueError as err:
                if "AbstractMesh" not in str(err):
                    raise
                # ... which JAX refuses when a primitive needs devices to lower;
                # primitives' Pallas kernels get it from lowering_context().
                return export(*args).mlir_module()
    finally:
        _aot_gpu.reset(token)
