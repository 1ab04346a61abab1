"""Run ``@cuda.jit`` kernels on the CPU with Numba's CUDA simulator, per call.

The simulator is normally switched on process-wide with ``NUMBA_ENABLE_CUDASIM=1``,
which replaces ``numba.cuda`` itself: every ``@cuda.jit`` then returns a simulator
object and no real kernel can compile in that process. We do not do that. The
simulator's kernel runner (``numba.cuda.simulator.kernel.FakeCUDAKernel``) only
needs a kernel's Python function, so we build one per launch from the real
dispatcher's ``py_func``; while it runs, the names in the kernel's module that refer
to ``numba.cuda`` point at the simulated module (the simulator's own mechanism) and
device functions (``@cuda.jit(device=True)``) at simulated ones. The real
``numba.cuda`` stays in place, so PTX compilation and GPU launches in the same
process are unaffected. The swap is process-wide for that module's globals while a
launch runs; launches are serialised by a lock.

Launches see NumPy arrays: inputs are copied (JAX hands read-only buffers),
outputs start as zeros, or as a copy of the input they alias (and that input's slot
then *is* the output array, as on the GPU where both are one buffer). Under
``jax.vmap`` with ``expand_dims``/``broadcast_all`` the kernel runs once per batch
element on slices (the launcher's rule, :mod:`polykernel.launcher.batching`).

Example:
    >>> import numpy as np
    >>> from numba import cuda
    >>> from polykernel.backends.numba_cuda.cpu import run_kernel
    >>> @cuda.jit
    ... def add(x, y, out):
    ...     i = cuda.grid(1)
    ...     if i < out.size:
    ...         out[i] = x[i] + y[i]
    >>> x, y, out = np.ones(4, np.float32), np.ones(4, np.float32), np.zeros(4)
    >>> run_kernel(add, (1, 1, 1), (4, 1, 1), 0, [x, y, out])
    >>> out.tolist()
    [2.0, 2.0, 2.0, 2.0]
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ...launcher.batching import plan_batch

__all__ = ["SimulatedCuda", "run_batched", "run_kernel", "simulated_globals"]

_lock = threading.RLock()


def _fake(py_func: Callable[..., Any], device: bool, fastmath: bool = False) -> Any:
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return FakeCUDAKernel(_simulated_closure(py_func), device=device, fastmath=fastmath)


def _simulated_closure(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, or a copy whose closure sees the simulator where ``fn``'s sees CUDA.

    The simulator swaps names in a kernel's module globals only; a kernel defined in
    a function (``from numba import cuda`` there, device functions beside it) finds
    ``numba.cuda`` and real dispatchers in its closure cells instead.
    """
    closure = getattr(fn, "__closure__", None)
    if not closure:
        return fn
    from numba import cuda

    cells, changed = [], False
    for cell in closure:
        try:
            stand_in = _stand_in(cell.cell_contents, cuda, SimulatedCuda())
        except ValueError:  # a cell not filled yet
            stand_in = None
        cells.append(cell if stand_in is None else types.CellType(stand_in))
        changed = changed or stand_in is not None
    if not changed:
        return fn
    clone = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                               fn.__defaults__, tuple(cells))  # fmt: skip
    clone.__kwdefaults__ = fn.__kwdefaults__
    return clone


class SimulatedCuda:
    """Stands for ``numba.cuda`` in host code run under the simulator.

    Host code (a :func:`numba_cuda_callable` function) gets the simulator package
    (``device_array``, ``stream``, ...); kernels of the same module, which find this
    object rather than ``numba.cuda`` in their globals, get the running launch's
    simulated module (``grid``, ``threadIdx``, ``shared``, ...).
    """

    def __getattr__(self, name: str) -> Any:
        import numba.cuda.simulator as package
        from numba.cuda.simulator import kernel

        context = kernel._get_kernel_context()
        return getattr(package if context is None else context, name)


def _is_dispatcher(value: Any) -> bool:
    return type(value).__name__ == "CUDADispatcher" and hasattr(value, "py_func")


def _stand_in(value: Any, cuda: Any, module: Any) -> Any:
    """What a simulated launch sees instead of ``value``: a simulated kernel or
    device function for a dispatcher, ``module`` for ``numba.cuda``; None: ``value``."""
    if _is_dispatcher(value):
        return _fake(value.py_func, bool(value.targetoptions.get("device")))
    if module is not None and value is cuda:
        return module
    return None


@contextlib.contextmanager
def simulated_globals(fn: Callable[..., Any], module: Any = None) -> Iterator[None]:
    """While inside, ``fn``'s module sees simulated kernels and device functions.

    ``module``: also point names bound to ``numba.cuda`` at it (a
    :class:`SimulatedCuda` for host code such as :func:`numba_cuda_callable`
    functions).
    """
    from numba import cuda

    glob = fn.__globals__
    saved: dict[str, Any] = {}
    with _lock:
        for name, value in list(glob.items()):
            stand_in = _stand_in(value, cuda, module)
            if stand_in is not None:
                saved[name] = value
                glob[name] = stand_in
        try:
            yield
        finally:
            glob.update(saved)


def run_kernel(
    kernel: Any,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    shared_mem: int,
    arrays: Sequence[np.ndarray],
) -> None:
    """Launch ``kernel`` once on ``arrays`` (inputs then outputs, written in place)."""
    if 0 in grid:  # the launcher launches nothing for an empty grid
        return
    py_func = kernel.py_func
    fastmath = bool(getattr(kernel, "targetoptions", {}).get("fastmath", False))
    fake = _fake(py_func, device=False, fastmath=fastmath)
    with simulated_globals(py_func):
        fake[grid, block, 0, shared_mem](*arrays)


def _batch_shape(compiled: Sequence[tuple[int, ...]], shapes) -> tuple[int, ...]:
    extra = max(len(s) - len(c) for c, s in zip(compiled, shapes, strict=False))
    dims = [1] * max(extra, 0)
    for c, s in zip(compiled, shapes, strict=False):
        if len(s) - len(c) == extra:
            dims = [max(a, b) for a, b in zip(dims, s[:extra], strict=True)]
    return tuple(dims)


def run_batched(
    launch: Callable[[list[np.ndarray]], None],
    compiled: Sequence[tuple[int, ...]],
    outs: Sequence[tuple[Any, np.dtype]],
    inputs: Sequence[np.ndarray],
    aliases: dict[int, int] | None = None,
    name: str = "numba_cuda_kernel",
) -> list[np.ndarray]:
    """Allocate the outputs, then ``launch`` once per batch element; return them.

    Args:
        launch: runs the kernel on one element's arrays (inputs then outputs).
        compiled: the unbatched shape of every input, then every output.
        outs: each output's unbatched shape and dtype.
        inputs: the callback's input arrays (with any ``vmap`` axes).
        aliases: input index -> output index (``input_output_aliases``).
    """
    aliases = dict(aliases or {})
    n_in = len(inputs)
    batch = _batch_shape(compiled[:n_in], [np.shape(x) for x in inputs])
    results = []
    for j, (shape, dtype) in enumerate(outs):
        source = next((i for i, o in aliases.items() if o == j), None)
        full = (*batch, *shape)
        if source is None:
            results.append(np.zeros(full, dtype))
        else:
            results.append(np.array(np.broadcast_to(inputs[source], full), dtype))
    arrays = [np.array(x) for x in inputs]
    for i, j in aliases.items():
        arrays[i] = results[j]  # one buffer, as on the GPU
    arrays += results
    plan = plan_batch(list(compiled), n_in, [a.shape for a in arrays], name)
    with _lock:
        for element in plan.elements():
            launch([a[(*plan.index(element, b), ...)] for b, a in enumerate(arrays)])
    return results
