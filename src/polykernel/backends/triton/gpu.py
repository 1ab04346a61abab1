"""The GPU path of a Triton kernel: compile for the device, register with our launcher.

:func:`gpu_kernel` compiles the kernel with Triton for one architecture (no GPU
needed: :mod:`.compile`) and registers it with the native GPU launcher
(:mod:`polykernel.launcher`) with the launch spec of one call: buffers, Triton's
parameter list (:func:`.params.launch_params`), grid, block, shared memory and, when the
kernel needs one, its per-program global scratch as one more (discarded) output.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import KernelCompilationError, UnsupportedOperationError
from .params import TritonSignature, launch_params
from .source import INTERPRET_ENV

__all__ = ["gpu_kernel", "target_arch"]


def target_arch() -> str:
    """The architecture to compile for: the pin, ``$POLYKERNEL_CUDA_ARCH``, JAX's GPU.

    ``polykernel.config.set_compute_capability`` and the environment variable win
    (first entry); otherwise the first GPU JAX sees, else ``nvidia-smi``.

    Raises:
        GpuArchDetectionError: nothing pinned and no GPU to ask.
    """
    import os

    from ...native.toolchain import ARCH_ENV, cuda_arches
    from ...settings.cuda_arch import normalize_arch
    from ...settings.preferences import pinned_cuda_arches

    if not (pinned_cuda_arches() or os.environ.get(ARCH_ENV, "").strip()):
        import jax

        try:
            capability = jax.devices("gpu")[0].compute_capability
        except (RuntimeError, AttributeError, IndexError):
            capability = None
        if capability:
            return normalize_arch(capability)
    return cuda_arches(None)[0]


def gpu_kernel(
    kernel: Any,
    inputs: Sequence[tuple[tuple[int, ...], Any]],
    sig: TritonSignature,
    grid: tuple[int, int, int],
    arch: str | None = None,
) -> Any:
    """Compile ``kernel`` (a :class:`~.kernel.TritonKernel`) for ``arch`` (default:
    the GPU's) and register it with the launcher.

    Returns the :class:`~polykernel.launcher.GpuKernel`; needs no GPU when ``arch``
    is given (which is how the compile-level tests run).
    """
    from ...launcher import BufferSpec, LaunchSpec, register_gpu_kernel
    from .compile import compile_triton

    arch = arch or target_arch()
    try:
        compiled = compile_triton(
            kernel.source.jit(), sig, arch, kernel.num_warps, kernel.num_stages
        )
    except Exception as err:
        if not kernel.source.interpreted:
            raise
        raise KernelCompilationError(
            f"{err}\n{INTERPRET_ENV}=1 is set in this process: @triton.jit returned "
            f"interpreter-only functions, and Triton cannot compile a kernel (or the "
            f"@triton.jit helpers it calls) from them for a GPU. Unset "
            f"{INTERPRET_ENV} in processes that run Triton kernels on a GPU; on the "
            f"CPU, polykernel interprets kernels without it."
        ) from err
    buffers = [BufferSpec(np.dtype(d).name, tuple(s)) for s, d in inputs]
    buffers += [BufferSpec(np.dtype(o.dtype).name, tuple(o.shape))
                for o in kernel.out_specs]  # fmt: skip
    scratch = None
    if compiled.global_scratch_size > 0:
        # Triton's per-program scratch becomes one more (discarded) output.
        scratch = len(buffers)
        size = math.prod(grid) * compiled.global_scratch_size
        buffers.append(BufferSpec("uint8", (size,)))
    if compiled.profile_scratch_size > 0:
        raise UnsupportedOperationError(
            f"triton_kernel '{kernel.name}': the kernel was compiled with profiling "
            "instrumentation (profile scratch); unset Triton's instrumentation "
            "mode to launch it through polykernel."
        )
    spec = LaunchSpec(
        n_in=len(inputs),
        buffers=tuple(buffers),
        params=launch_params(sig, len(buffers), global_scratch=scratch),
        grid=grid,
        block=(32 * compiled.num_warps, 1, 1),
        shared_mem=compiled.shared,
    )
    return register_gpu_kernel(compiled.images, compiled.entry, spec,
                               name=f"triton:{kernel.name}")  # fmt: skip
