"""The CUDA call of a Warp kernel: its ahead-of-time build run by our launcher.

Warp's CUDA entry point takes ``launch_bounds_t<N>`` and then every parameter by
value (arrays as 56-byte ``array_t`` structs). All of it is constant for a given
signature and shape except the buffers' device pointers, which the native
launcher patches into each ``array_t``'s first 8 bytes per launch (and per batch
element under ``vmap``). No Python and no Warp runtime run per call.

Built and checked ahead of time on any machine (``tests/backends/warp/test_gpu.py``,
marked ``slow``); launched on an H200 (``.ci/gpu-check OUT warp``, with warp-lang
carried there: its launch tests are marked ``gpu``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ffi.handler_ir.signature import Signature
from ...native.toolchain import ARCH_ENV, cuda_arches
from ...settings.cuda_arch import normalize_arch
from ...settings.preferences import pinned_cuda_arches
from .plan import KernelPlan, array_bytes, array_shape, bounds_bytes, fold_launch

__all__ = ["gpu_target", "launch_spec"]


def launch_spec(
    plan: KernelPlan,
    shapes: Sequence[tuple[int, ...]],
    outs: Sequence[Any],
    values: Sequence[tuple[str, Any]],
    launch_dims: tuple[int, ...] | None,
    block_dim: int,
    launch_ndim: int,
    shared_mem: int = 0,
) -> Any:
    """The :class:`polykernel.launcher.LaunchSpec` of one call (pure, no CUDA)."""
    from ...launcher.layout import BufferSpec, LaunchSpec, constant, struct_param

    dtypes = [a.dtype for a in plan.arrays]
    all_shapes = [*shapes, *(tuple(o.shape) for o in outs)]
    buffers = tuple(
        BufferSpec(d, tuple(s)) for d, s in zip(dtypes, all_shapes, strict=True)
    )
    dims = launch_dims if launch_dims is not None else array_shape(all_shapes[0])
    _, size, _ = fold_launch(dims, launch_ndim)
    params, scalars, k = (
        [struct_param(bounds_bytes(dims, launch_ndim))],
        dict(values),
        0,
    )
    for arg in plan.args:
        if arg.kind == "scalar":
            params.append(constant(scalars[arg.label], arg.dtype))
            continue
        item = np.dtype(arg.dtype).itemsize
        params.append(struct_param(array_bytes(all_shapes[k], item), buffer=k))
        k += 1
    blocks = math.ceil(size / block_dim)
    return LaunchSpec(
        n_in=len(shapes),
        buffers=buffers,
        params=tuple(params),
        grid=(blocks, 1, 1),
        block=(block_dim if blocks else 0, 1, 1),
        shared_mem=shared_mem,
    )


def _device_arch() -> str:
    """The architecture to build for: the pinned or ``$POLYKERNEL_CUDA_ARCH`` one,
    else the GPU's. The GPU is asked for by platform: ``jax.devices()`` lists only
    the default platform's devices, which are the CPU's under
    ``JAX_PLATFORMS=cpu,cuda`` (the fallback that gave sm_80 on an H200)."""
    import jax

    if pinned_cuda_arches() or os.environ.get(ARCH_ENV, "").strip():
        return cuda_arches(None)[0]
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:  # no GPU backend in this process
        gpus = []
    cc = getattr(gpus[0], "compute_capability", None) if gpus else None
    return normalize_arch(str(cc)) if cc else cuda_arches(None)[0]


def gpu_target(owner: Any, sig: Signature, shapes: Any, values: Any) -> tuple:
    """Build for this device's arch, register with the launcher; return
    ``(FFI target, attributes)``."""
    from ...launcher.kernels import register_gpu_kernel
    from .gpu_build import build_cuda

    del sig  # the launch spec carries dtypes and shapes
    build = build_cuda(owner.kernel, [_device_arch()])
    spec = launch_spec(owner.plan, shapes, owner.out_specs, values,
                       owner.launch_dims, build.block_dim, build.launch_ndim,
                       build.shared_mem)  # fmt: skip
    kernel = register_gpu_kernel(build.images, build.entry, spec, name=owner.name)
    return kernel.target, kernel.attributes()
