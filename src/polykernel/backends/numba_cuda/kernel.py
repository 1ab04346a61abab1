"""``numba_cuda_kernel``: a ``@cuda.jit`` kernel as a JAX function, GPU and CPU.

On a GPU (a primitive lowering for ``gpu``, or outside a primitive when JAX's
default device is a GPU: ``jax.default_device`` or the first device) the kernel is
compiled ahead for the device's architecture (:mod:`.compiler`) and registered with
the native launcher (:mod:`polykernel.gpu`): the call is a typed XLA FFI custom
call whose handler is machine code that launches the kernel on XLA's stream. No
Python runs per call, and the handler is command-buffer compatible, so XLA can
record it in CUDA graphs.

On the CPU (a primitive lowering for ``cpu``, or JAX's default device is a CPU)
the same kernel runs under Numba's CUDA simulator through ``jax.pure_callback``
(:mod:`.simulator`): slow, but it executes the kernel's own grid/block arithmetic,
so semantics are tested without a GPU.

Example:
    >>> from numba import cuda                            # doctest: +SKIP
    >>> @cuda.jit
    ... def add(x, y, out):
    ...     i = cuda.grid(1)
    ...     if i < out.size:
    ...         out[i] = x[i] + y[i]
    >>> f = numba_cuda_kernel(add, jax.ShapeDtypeStruct((8,), jnp.float32),
    ...                       launch_dims=8)              # doctest: +SKIP
    >>> f(x, y)                                           # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...call_spec import kernel_aliases
from ...errors import KernelCallError, KernelRegistrationError, KernelTypeError
from ...gpu.layout import BufferSpec
from ...platform_context import traced_for_gpu
from .array_abi import kernel_launch_spec
from .compiler import check_kernel, compile_kernel, kernel_name, require_numba_cuda
from .launch_config import resolve_launch
from .outs import flatten_outs, unflatten
from .simulator import run_batched, run_kernel

__all__ = ["NumbaCudaKernel", "numba_cuda_kernel", "use_gpu_path"]


def use_gpu_path() -> bool:
    """True when the call being traced is for a GPU (see the module docstring)."""
    return traced_for_gpu()


def check_call_options(
    where: str, vmap_method: object, aliases: object, n_outputs: int
) -> dict[int, int] | None:
    """:func:`~polykernel.call_spec.kernel_aliases`, keeping None for no aliases.

    Every bad launch option of the Numba-CUDA wrappers is a ``ValueError`` (their
    documented contract), a malformed alias mapping included.
    """
    try:
        checked = kernel_aliases(where, vmap_method, aliases, n_outputs)
    except KernelTypeError as err:
        raise KernelRegistrationError(str(err)) from None
    return None if aliases is None else checked


class NumbaCudaKernel:
    """The callable :func:`numba_cuda_kernel` returns (see there)."""

    def __init__(self, kernel, outs, grid, block, launch_dims, threads_per_block,
                 shared_mem, vmap_method, input_output_aliases) -> None:  # fmt: skip
        self.kernel = kernel
        self.name = kernel_name(kernel)
        where = f"numba_cuda_kernel '{self.name}'"
        self.out_specs, self.treedef = flatten_outs(where, outs)
        self.grid, self.block = resolve_launch(
            grid, block, launch_dims, threads_per_block, where
        )
        if not isinstance(shared_mem, int) or shared_mem < 0:
            raise KernelRegistrationError(
                f"{where}: shared_mem must be a non-negative number of bytes, got "
                f"{shared_mem!r}."
            )
        self.shared_mem = shared_mem
        self.vmap_method = vmap_method
        self.aliases = check_call_options(
            where, vmap_method, input_output_aliases, len(self.out_specs)
        )

    def _buffers(self, args: tuple[Any, ...]) -> list[BufferSpec]:
        specs = []
        for i, x in enumerate(args):
            if not (hasattr(x, "shape") and hasattr(x, "dtype")):
                raise KernelCallError(
                    f"numba_cuda_kernel '{self.name}': input {i} must be an array, "
                    f"got {type(x).__name__}; pass scalars as 0-d arrays."
                )
            specs.append(BufferSpec(np.dtype(x.dtype).name, tuple(x.shape)))
        for o in self.out_specs:
            specs.append(BufferSpec(np.dtype(o.dtype).name, tuple(o.shape)))
        return specs

    def __call__(self, *args: Any) -> Any:
        import jax.numpy as jnp

        args = tuple(a if hasattr(a, "dtype") else jnp.asarray(a) for a in args)
        buffers = self._buffers(args)
        if use_gpu_path():
            results = self._gpu_call(args, buffers)
        else:
            results = self._simulated_call(args, buffers)
        return unflatten(self.treedef, results)

    def _gpu_call(self, args, buffers) -> list[Any]:
        from ...gpu.launcher import register_gpu_kernel
        from ...native.toolchain import cuda_arches

        dtypes = tuple(b.dtype for b in buffers)
        ranks = tuple(len(b.shape) for b in buffers)
        images, entry = [], None
        for arch in cuda_arches(None):
            entry, found = compile_kernel(self.kernel, dtypes, ranks, arch)
            images += found
        spec = kernel_launch_spec(buffers, len(args), self.grid, self.block,
                                  self.shared_mem)  # fmt: skip
        launched = register_gpu_kernel(images, entry, spec, name=self.name)
        return launched(
            *args,
            input_output_aliases=self.aliases,
            vmap_method=self.vmap_method,
        )

    def _simulated_call(self, args, buffers) -> list[Any]:
        import jax

        compiled = [b.shape for b in buffers]
        outs = [(tuple(o.shape), np.dtype(o.dtype)) for o in self.out_specs]

        def launch(arrays: list[np.ndarray]) -> None:
            run_kernel(self.kernel, self.grid, self.block, self.shared_mem, arrays)

        def callback(*xs: np.ndarray) -> list[np.ndarray]:
            return run_batched(launch, compiled, outs, xs, self.aliases, self.name)

        shapes = [jax.ShapeDtypeStruct(o.shape, o.dtype) for o in self.out_specs]
        return list(
            jax.pure_callback(callback, shapes, *args, vmap_method=self.vmap_method)
        )


def numba_cuda_kernel(
    kernel: Any,
    outs: Any,
    *,
    grid: int | tuple[int, ...] | None = None,
    block: int | tuple[int, ...] | None = None,
    launch_dims: int | tuple[int, ...] | None = None,
    threads_per_block: int = 256,
    shared_mem: int = 0,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
) -> NumbaCudaKernel:
    """Wrap a ``@cuda.jit`` kernel as a function of JAX arrays.

    The kernel takes every input, then every output, as arrays and writes the
    outputs in place. On a GPU it is compiled ahead (PTX and a cubin for the
    device's architecture) and launched from native code on XLA's stream, with no
    Python per call and CUDA-graph capture allowed; on the CPU it runs under Numba's
    CUDA simulator (see ``docs/gpu.md``).

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
            ``broadcast_all`` launch the kernel once per batch element.
        input_output_aliases: ``{input index: output index}`` (in place).

    Returns:
        A callable taking JAX arrays, usable under ``jax.jit``.

    Raises:
        ImportError: Numba's CUDA target is not installed (names the extra).
        ValueError: neither ``(grid, block)`` nor ``launch_dims`` (or both) given.
        TypeError: ``kernel`` is not a ``@cuda.jit`` kernel (also an
            ``AssertionError``, as the reference documents).

    Example:
        >>> f = numba_cuda_kernel(add, jax.ShapeDtypeStruct((1024,), jnp.float32),
        ...                       grid=4, block=256)      # doctest: +SKIP
        >>> jax.jit(f)(a, b)                              # doctest: +SKIP
    """
    require_numba_cuda("numba_cuda_kernel")
    check_kernel(kernel, "numba_cuda_kernel")
    return NumbaCudaKernel(kernel, outs, grid, block, launch_dims, threads_per_block,
                           shared_mem, vmap_method, input_output_aliases)  # fmt: skip
