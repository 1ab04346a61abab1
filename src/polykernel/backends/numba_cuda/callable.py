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
``@cuda.jit`` kernels at simulated ones (see :mod:`.simulator`); arrays are the
simulator's device arrays over NumPy buffers.

Example:
    >>> def two_steps(x, out, stream):
    ...     scale[1, 8, stream](x, out)
    ...     shift[1, 8, stream](out)
    >>> f = numba_cuda_callable(two_steps, jax.ShapeDtypeStruct((8,), jnp.float32))
    ...                                                   # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import KernelTypeError
from .compiler import require_numba_cuda
from .host_handler import DeviceBuffer, HostHandler, make_host_handler
from .kernel import check_call_options, use_gpu_path
from .outs import flatten_outs, unflatten
from .simulator import SimulatedCuda, simulated_globals

__all__ = ["NumbaCudaCallable", "numba_cuda_callable"]

_counter = itertools.count()
_lock = threading.Lock()
_handlers: dict[str, HostHandler] = {}  # keeps every ctypes handler alive


def _batch_of(inputs: list[np.ndarray], compiled: list[tuple[int, ...]]) -> tuple:
    extra = max((x.ndim - len(c) for x, c in zip(inputs, compiled, strict=True)),
                default=0)  # fmt: skip
    dims = [1] * max(extra, 0)
    for x, c in zip(inputs, compiled, strict=True):
        if x.ndim - len(c) == extra:
            dims = [max(a, b) for a, b in zip(dims, x.shape[:extra], strict=True)]
    return tuple(dims)


class NumbaCudaCallable:
    """The callable :func:`numba_cuda_callable` returns (see there)."""

    def __init__(self, fn, outs, vmap_method, input_output_aliases) -> None:
        self.fn = fn
        self.name = getattr(fn, "__qualname__", type(fn).__name__)
        where = f"numba_cuda_callable '{self.name}'"
        self.out_specs, self.treedef = flatten_outs(where, outs)
        self.vmap_method = vmap_method
        self.aliases = check_call_options(
            where, vmap_method, input_output_aliases, len(self.out_specs)
        )
        self._target: str | None = None

    def __call__(self, *args: Any) -> Any:
        import jax
        import jax.numpy as jnp

        args = tuple(a if hasattr(a, "dtype") else jnp.asarray(a) for a in args)
        if use_gpu_path():
            call = jax.ffi.ffi_call(
                self._gpu_target(),
                self.out_specs,
                vmap_method=self.vmap_method,
                input_output_aliases=self.aliases,
            )
            results = list(call(*args))
        else:
            compiled = [tuple(a.shape) for a in args]

            def callback(*xs: np.ndarray) -> list[np.ndarray]:
                return self._simulate(list(xs), compiled)

            results = list(jax.pure_callback(callback, self.out_specs, *args,
                                             vmap_method=self.vmap_method))  # fmt: skip
        return unflatten(self.treedef, results)

    # -- CPU: Numba's simulator ------------------------------------------------------
    def _simulate(self, xs: list[np.ndarray], compiled) -> list[np.ndarray]:
        import numba.cuda.simulator as sim
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        batch = _batch_of(xs, compiled)
        outs = [np.zeros((*batch, *o.shape), o.dtype) for o in self.out_specs]
        arrays = [np.array(x) for x in xs]
        for i, j in (self.aliases or {}).items():
            outs[j][...] = arrays[i]
            arrays[i] = outs[j]  # one buffer, as on the GPU
        wrapped = [FakeCUDAArray(a) for a in arrays + outs]
        with simulated_globals(self.fn, module=SimulatedCuda()):
            self.fn(*wrapped, sim.stream())
        return outs

    # -- GPU: a Python FFI handler on XLA's stream -----------------------------------
    def _gpu_target(self) -> str:
        with _lock:
            if self._target is None:
                import jax

                name = f"polykernel_numba_cuda_callable_{next(_counter)}"
                handler = make_host_handler(name, self._run_on_gpu)
                jax.ffi.register_ffi_target(name, handler.capsule(), platform="CUDA")
                _handlers[name] = handler
                self._target = name
        return self._target

    def _run_on_gpu(self, ins: list[DeviceBuffer], outs: list[DeviceBuffer],
                    stream: int) -> None:  # fmt: skip
        from numba import cuda

        def device_array(b: DeviceBuffer) -> Any:
            desc = {"shape": b.shape, "typestr": np.dtype(b.dtype).str,
                    "data": (b.data, False), "version": 3, "strides": None}  # fmt: skip
            return cuda.from_cuda_array_interface(desc, owner=None, sync=False)

        arrays = [device_array(b) for b in ins + outs]
        self.fn(*arrays, cuda.external_stream(stream))


def numba_cuda_callable(
    func: Callable[..., Any],
    outs: Any,
    *,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
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
        >>> f = numba_cuda_callable(two_steps, jax.ShapeDtypeStruct((8,), F32))
        ...                                               # doctest: +SKIP
        >>> jax.jit(f)(x)                                 # doctest: +SKIP
    """
    require_numba_cuda("numba_cuda_callable")
    if not callable(func):
        raise KernelTypeError(
            f"numba_cuda_callable: func must be a Python function taking (*inputs, "
            f"*outputs, stream), got {type(func).__name__}."
        )
    return NumbaCudaCallable(func, outs, vmap_method, input_output_aliases)
