"""``numba_cuda_kernel``: a ``@cuda.jit`` kernel as a JAX function, GPU and CPU.

On a GPU (a primitive lowering for ``gpu``, or outside a primitive when JAX's
default device is a GPU: ``jax.default_device`` or the first device) the kernel is
compiled ahead for the device's architecture (:mod:`.compile`) and registered with
the native launcher (:mod:`polykernel.launcher`): the call is a typed XLA FFI custom
call whose handler is machine code that launches the kernel on XLA's stream. No
Python runs per call, and the handler is command-buffer compatible, so XLA can
record it in CUDA graphs.

On the CPU (a primitive lowering for ``cpu``, or JAX's default device is a CPU)
the same kernel runs under Numba's CUDA simulator through ``jax.pure_callback``
(:mod:`.cpu`): slow, but it executes the kernel's own grid/block arithmetic,
so semantics are tested without a GPU.

See :func:`numba_cuda_kernel` for an example (it runs on the CPU as written).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...contract.kernel import BackendKernel
from ...contract.launch import launch_count, size_of
from ...contract.outs import OutSpec
from ...contract.parameters import Parameters
from ...contract.scalars import Scalars, inferred_dtype
from ...errors import KernelCallError, KernelRegistrationError
from ...launcher.layout import BufferSpec
from ...platforms import Platform
from ...types import LaunchDims, Outs, VmapMethod
from .array_abi import kernel_launch_spec
from .compile import check_kernel, kernel_images, kernel_name, require_numba_cuda
from .launch_config import resolve_launch

__all__ = ["NUMBA_CUDA_DTYPES", "NumbaCudaKernel", "buffer_specs", "numba_cuda_kernel"]

#: The array dtypes Numba can type (not bfloat16: Numba has none).
NUMBA_CUDA_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
    "uint64", "float16", "float32", "float64", "complex64", "complex128",
)  # fmt: skip


def buffer_specs(
    kernel: BackendKernel, args: Sequence[Any], outs: Sequence[Any]
) -> list[BufferSpec]:
    """The buffers of a call: every input, then every output (dtypes checked by the
    kernel's declared rule).

    Raises:
        KernelCallError: an input is not an array.
        UnsupportedDtypeError: an input's dtype Numba cannot type.
    """
    specs = []
    for i, x in enumerate(args):
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            raise KernelCallError(
                f"{kernel.where}: input {i} must be an array, got "
                f"{type(x).__name__}; pass scalars as 0-d arrays."
            )
        dtype = kernel.check_dtype(f"input {i}", x.dtype)
        specs.append(BufferSpec(dtype, tuple(x.shape)))
    for o in outs:
        specs.append(BufferSpec(np.dtype(o.dtype).name, tuple(o.shape)))
    return specs


class NumbaCudaKernel(BackendKernel):
    """The callable :func:`numba_cuda_kernel` returns (see there)."""

    backend = "numba_cuda"
    sequence = None  # results keep the pytree structure of outs

    def __init__(self, kernel, outs, grid, block, vmap_method,
                 input_output_aliases, shared_mem=0) -> None:  # fmt: skip
        super().__init__(
            "numba_cuda_kernel",
            kernel_name(kernel),
            outs,
            platforms=(Platform.CPU, Platform.GPU),
            vmap_method=vmap_method,
            input_output_aliases=input_output_aliases,
            # Arrays fill the leading parameters; the rest are scalars, by value.
            parameters=Parameters.of_function(_py_func(kernel), leading="buffers"),
            out_dtypes=NUMBA_CUDA_DTYPES,  # refused when wrapping, as the reference
        )
        self.kernel = kernel
        self.grid, self.block = grid, block
        self.shared_mem = shared_mem

    def infer_dtype(self, value: Any) -> Any:
        """Numba's rule, as on the CPU: a Python ``int`` is int64, a ``float``
        float64; a NumPy scalar keeps its dtype (one Numba can type)."""
        dtype = inferred_dtype(value)
        return dtype if dtype is not None and dtype.name in NUMBA_CUDA_DTYPES else None

    def launches_nothing(self, arrays: Sequence[Any], scalars: Scalars) -> bool:
        return size_of(self.grid) == 0 or size_of(self.block) == 0

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        buffers = buffer_specs(self, arrays, outs.structs)
        values = self._scalar_values(scalars)
        if platform == Platform.GPU:
            return self._gpu_call(arrays, buffers, values)
        return self._simulated_call(arrays, buffers, values)

    def _scalar_values(self, scalars: Scalars) -> list[Any]:
        """The call's scalars in the order of the kernel's parameters."""
        given = dict(scalars)
        return [given[p.name] for p in self.parameters.entries if p.name in given]

    def _gpu_call(self, args, buffers, values) -> list[Any]:
        from ...launcher.kernels import register_gpu_kernel
        from ...native.toolchain import cuda_arches

        dtypes = tuple(b.dtype for b in buffers)
        ranks = tuple(len(b.shape) for b in buffers)
        scalar_dtypes = tuple(v.dtype.name for v in values)
        entry, images = kernel_images(self.kernel, dtypes, ranks, cuda_arches(None),
                                      scalar_dtypes)  # fmt: skip
        # Scalars are baked into the launch (a new value: a new spec, no compile).
        spec = kernel_launch_spec(buffers, len(args), self.grid, self.block,
                                  self.shared_mem, values)  # fmt: skip
        launched = register_gpu_kernel(images, entry, spec, name=self.name)
        return launched(
            *args,
            input_output_aliases=self.aliases or None,
            vmap_method=self.vmap_method,
        )

    def _simulated_call(self, args, buffers, values) -> list[Any]:
        import jax

        # Here, not at the top: a GPU process's lowering never needs the simulator.
        from .cpu import run_batched, run_kernel

        compiled = [b.shape for b in buffers]
        outs = [(tuple(o.shape), np.dtype(o.dtype)) for o in self.out_specs]

        def launch(arrays: list[np.ndarray]) -> None:
            run_kernel(self.kernel, self.grid, self.block, self.shared_mem,
                       [*arrays, *values])  # fmt: skip

        def callback(*xs: np.ndarray) -> list[np.ndarray]:
            return run_batched(launch, compiled, outs, xs, self.aliases or None,
                               self.name)  # fmt: skip

        return list(
            jax.pure_callback(
                callback, list(self.out_specs), *args, vmap_method=self.vmap_method
            )
        )


def _py_func(kernel: Any) -> Any:
    """The kernel's Python function (a simulator kernel keeps it as ``fn``)."""
    return getattr(kernel, "py_func", None) or getattr(kernel, "fn", kernel)


def numba_cuda_kernel(
    kernel: Any,
    outs: Outs,
    *,
    grid: LaunchDims | None = None,
    block: LaunchDims | None = None,
    launch_dims: LaunchDims | None = None,
    threads_per_block: int = 256,
    shared_mem: int = 0,
    vmap_method: VmapMethod | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
) -> NumbaCudaKernel:
    """Wrap a ``@cuda.jit`` kernel as a function of JAX arrays.

    The kernel takes every input, then every output, as arrays and writes the
    outputs in place; parameters after them are scalars, given as keywords of the
    call (typed by value, as Numba does: an ``int`` is int64, a ``float``
    float64; on a GPU their values are baked into the launch, not compiled in).
    On a GPU it is compiled ahead (PTX and a cubin for the device's architecture)
    and launched from native code on XLA's stream, with no Python per call and
    CUDA-graph capture allowed; on the CPU it runs under Numba's CUDA simulator
    (see ``docs/gpu.md``).

    Args:
        kernel: A kernel decorated with ``@numba.cuda.jit``.
        outs: A ``jax.ShapeDtypeStruct`` (one array returned) or a sequence/pytree
            of them (the same structure returned).
        grid: Blocks per grid (int or up to 3 ints); only together with ``block``.
        block: Threads per block; only together with ``grid``.
        launch_dims: Total threads (int or up to 3 ints), instead of grid/block:
            ``grid = ceil(launch_dims / threads_per_block)`` along x.
        threads_per_block: Threads per block along x with ``launch_dims``.
        shared_mem: Dynamic shared memory in bytes.
        vmap_method: As for ``jax.ffi.ffi_call``; ``expand_dims`` and
            ``broadcast_all`` launch the kernel once per batch element. ``None``
            (default) means ``"expand_dims"`` (``"broadcast_all"`` with aliases),
            the default of every polykernel kernel wrapper. Only with
            ``launch_dims``: an explicit ``grid``/``block`` with a ``vmap_method``
            is refused, as in the reference.
        input_output_aliases: ``{input index: output index}`` (in place).

    Returns:
        A callable taking JAX arrays, usable under ``jax.jit``.

    Raises:
        ImportError: Numba's CUDA target is not installed (names the extra).
        ValueError: neither ``(grid, block)`` nor ``launch_dims`` (or both) given;
            ``vmap_method`` given with ``grid``/``block``; a bfloat16 output (an
            :class:`~polykernel.errors.UnsupportedDtypeError`, also a ``TypeError``).
            Configuration errors are reported before the kernel's type, as the
            reference does.
        TypeError: ``kernel`` is not a ``@cuda.jit`` kernel (also an
            ``AssertionError``, as the reference documents).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from numba import cuda
        >>> from polykernel import numba_cuda_kernel
        >>> @cuda.jit
        ... def add(x, y, out):
        ...     i = cuda.grid(1)
        ...     if i < out.size:
        ...         out[i] = x[i] + y[i]
        >>> f = numba_cuda_kernel(add, jax.ShapeDtypeStruct((8,), jnp.float32),
        ...                       grid=2, block=4)
        >>> a = b = jnp.arange(8, dtype=jnp.float32)
        >>> jax.jit(f)(a, b).tolist()
        [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0]
    """
    require_numba_cuda("numba_cuda_kernel")
    where = f"numba_cuda_kernel '{kernel_name(kernel)}'"
    # The launch configuration is checked first, as the reference does.
    grid3, block3 = resolve_launch(grid, block, launch_dims, threads_per_block, where)
    shared = launch_count(where, "shared_mem", shared_mem)
    if vmap_method is not None and launch_dims is None:
        raise KernelRegistrationError(
            f"{where}: vmap_method={vmap_method!r} cannot be combined with an explicit "
            f"grid/block, which is sized for one unbatched call. Pass launch_dims=... "
            f"instead of grid/block, or leave vmap_method unset (polykernel then "
            f"launches the grid once per batch element)."
        )
    check_kernel(kernel, "numba_cuda_kernel")
    return NumbaCudaKernel(kernel, outs, grid3, block3, vmap_method,
                           input_output_aliases, shared)  # fmt: skip
