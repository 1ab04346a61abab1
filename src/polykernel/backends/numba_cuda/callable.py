"""``numba_cuda_callable``: a Python function that launches Numba kernels itself.

The function is called as ``fn(*inputs, *outputs, stream)`` with Numba CUDA device
arrays (zero-copy views of XLA's buffers) and XLA's stream as a Numba stream, and
may launch any number of kernels on it (``kernel[grid, block, stream](...)``),
allocate temporaries, and so on. Because the function is arbitrary Python, this is
the one Numba-CUDA path that runs Python per call on the GPU: its handler is a
Python FFI handler (:mod:`.host_handler`), registered once per wrapper, and is not
CUDA-graph capturable. Use :func:`numba_cuda_kernel` for a single kernel: it has no
Python per call.

On the CPU the function runs under Numba's CUDA simulator: while it runs, the names
in its module bound to ``numba.cuda`` point at the simulator package and its
``@cuda.jit`` kernels at simulated ones (see :mod:`.cpu`); arrays are the
simulator's device arrays over NumPy buffers.

See :func:`numba_cuda_callable` for an example: two kernels launched in turn.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...contract.kernel import BackendKernel
from ...contract.outs import OutSpec
from ...contract.scalars import Scalars
from ...errors import KernelTypeError
from ...ffi import targets
from ...platforms import Platform
from ...types import Outs, VmapMethod
from .compile import require_numba_cuda
from .cpu import SimulatedCuda, simulated_globals
from .host_handler import DeviceBuffer, make_host_handler
from .naming import TARGET_PATTERN, callable_target, save_note
from .numpy_shim import apply_numpy_shim

__all__ = [
    "TARGET_PATTERN",
    "NumbaCudaCallable",
    "callable_target",
    "numba_cuda_callable",
    "register_callable",
]



def _batch_of(inputs: list[np.ndarray], compiled: list[tuple[int, ...]]) -> tuple:
    extra = max((x.ndim - len(c) for x, c in zip(inputs, compiled, strict=True)),
                default=0)  # fmt: skip
    dims = [1] * max(extra, 0)
    for x, c in zip(inputs, compiled, strict=True):
        if x.ndim - len(c) == extra:
            dims = [max(a, b) for a, b in zip(dims, x.shape[:extra], strict=True)]
    return tuple(dims)


def run_on_gpu(fn: Callable[..., Any], ins: list[DeviceBuffer],
               outs: list[DeviceBuffer], stream: int) -> None:  # fmt: skip
    """Call ``fn`` with Numba device arrays over XLA's buffers, on XLA's stream."""
    from numba import cuda

    # ``fn``'s launches compile kernels here, not through compile_kernel: the
    # NumPy >= 2.5 shim must be in place before numba-cuda's first compilation.
    apply_numpy_shim()

    def device_array(b: DeviceBuffer) -> Any:
        desc = {"shape": b.shape, "typestr": np.dtype(b.dtype).str,
                "data": (b.data, False), "version": 3, "strides": None}  # fmt: skip
        return cuda.from_cuda_array_interface(desc, owner=None, sync=False)

    arrays = [device_array(b) for b in ins + outs]
    fn(*arrays, cuda.external_stream(stream))


def register_callable(fn: Callable[..., Any]) -> str:
    """Register the CUDA handler that runs ``fn`` (once per function); its name."""
    name, portable = callable_target(fn)
    if targets.lookup(name, "CUDA") is None:
        label = getattr(fn, "__qualname__", type(fn).__name__)
        handler = make_host_handler(name, functools.partial(run_on_gpu, fn))
        targets.register(
            name,
            handler.address,
            platform="CUDA",
            identity=name,
            backend="numba_cuda",
            label=label,
            owner=handler,
            portable=portable,
            note="" if portable else (
                f"'{label}' is not a module-level function, so another process "
                "cannot find it by name"
            ),
        )
        if portable:
            save_note(name, fn)
    return name


class NumbaCudaCallable(BackendKernel):
    """The callable :func:`numba_cuda_callable` returns (see there)."""

    backend = "numba_cuda"
    sequence = None  # results keep the pytree structure of outs

    def __init__(self, fn, outs, vmap_method, input_output_aliases) -> None:
        super().__init__(
            "numba_cuda_callable",
            getattr(fn, "__qualname__", type(fn).__name__),
            outs,
            platforms=(Platform.CPU, Platform.GPU),
            vmap_method=vmap_method,
            input_output_aliases=input_output_aliases,
        )
        self.fn = fn

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        import jax

        if platform == Platform.GPU:
            call = jax.ffi.ffi_call(
                register_callable(self.fn),
                list(outs.structs),
                vmap_method=self.vmap_method,
                input_output_aliases=self.aliases or None,
            )
            return list(call(*arrays))
        compiled = [tuple(a.shape) for a in arrays]

        def callback(*xs: np.ndarray) -> list[np.ndarray]:
            return self._simulate(list(xs), compiled)

        return list(jax.pure_callback(callback, list(outs.structs), *arrays,
                                      vmap_method=self.vmap_method))  # fmt: skip

    # -- CPU: Numba's simulator ------------------------------------------------------
    def _simulate(self, xs: list[np.ndarray], compiled) -> list[np.ndarray]:
        import numba.cuda.simulator as sim
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        batch = _batch_of(xs, compiled)
        outs = [np.zeros((*batch, *o.shape), o.dtype) for o in self.out_specs]
        arrays = [np.array(x) for x in xs]
        for i, j in self.aliases.items():
            outs[j][...] = arrays[i]
            arrays[i] = outs[j]  # one buffer, as on the GPU
        wrapped = [FakeCUDAArray(a) for a in arrays + outs]
        with simulated_globals(self.fn, module=SimulatedCuda()):
            self.fn(*wrapped, sim.stream())
        return outs


def numba_cuda_callable(
    func: Callable[..., Any],
    outs: Outs,
    *,
    vmap_method: VmapMethod | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
) -> NumbaCudaCallable:
    """Wrap a Python function that launches Numba CUDA kernels on XLA's stream.

    Args:
        func: Called as ``func(*inputs, *outputs, stream)`` with Numba device arrays and
            XLA's stream (a Numba stream); it fills the outputs.
        outs: A ``jax.ShapeDtypeStruct`` or a sequence/pytree of them.
        vmap_method: As for ``jax.ffi.ffi_call``; with ``expand_dims`` or
            ``broadcast_all`` the function receives the batched arrays.
        input_output_aliases: ``{input index: output index}`` (in place).

    Returns:
        A callable taking JAX arrays, usable under ``jax.jit``.

    Raises:
        ImportError: Numba's CUDA target is not installed (names the extra).
        TypeError: ``func`` is not callable (also an ``AssertionError``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from numba import cuda
        >>> from polykernel import numba_cuda_callable
        >>> @cuda.jit
        ... def scale(x, out):
        ...     i = cuda.grid(1)
        ...     if i < out.size:
        ...         out[i] = 2 * x[i]
        >>> @cuda.jit
        ... def shift(out):
        ...     i = cuda.grid(1)
        ...     if i < out.size:
        ...         out[i] += 1
        >>> def two_steps(x, out, stream):
        ...     scale[1, 8, stream](x, out)
        ...     shift[1, 8, stream](out)
        >>> f = numba_cuda_callable(two_steps, jax.ShapeDtypeStruct((8,), jnp.float32))

        >>> jax.jit(f)(jnp.arange(8, dtype=jnp.float32)).tolist()
        [1.0, 3.0, 5.0, 7.0, 9.0, 11.0, 13.0, 15.0]
    """
    require_numba_cuda("numba_cuda_callable")
    if not callable(func):
        raise KernelTypeError(
            f"numba_cuda_callable: func must be a Python function taking (*inputs, "
            f"*outputs, stream), got {type(func).__name__}."
        )
    return NumbaCudaCallable(func, outs, vmap_method, input_output_aliases)
