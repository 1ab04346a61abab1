"""Run a ``@triton.jit`` kernel on NumPy arrays with Triton's interpreter (CPU path).

Triton ships an interpreter (``triton.runtime.interpreter``) that executes a kernel's
Python body program by program with NumPy. It is normally switched on process-wide
with ``TRITON_INTERPRET=1`` before kernels are decorated, and its launcher expects
PyTorch tensors. Neither is needed here: we rewrite the kernel's function with
:class:`~triton.runtime.interpreter.InterpretedFunction` (the same AST rewrite the
environment variable selects) and drive its :class:`GridExecutor` with arrays that
already live in host memory, so the executor's device-to-host copies are skipped and
NumPy arrays only need ``data_ptr()`` and ``dtype``. ``@triton.jit`` kernels keep
compiling for GPUs in the same process.

Scalars reach the kernel as Triton tensors of exactly the type the compiled kernel
gets (``fp32`` for a Python float, ...), so both paths compute with the same types.
Under ``jax.vmap`` the batch rule is the native launcher's
(:func:`polykernel.launcher.batching.plan_batch`): one interpreted launch per batch
element.

``@triton.jit`` functions the kernel calls (``tl.sum``, ``tl.max``, user helpers) are
interpreted too, for the duration of a launch. Execution is slow (NumPy per
program): keep CPU problems small.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...launcher.batching import plan_batch
from ...launcher.layout import _dtype
from .params import SCALAR_STORAGE, TritonSignature

__all__ = ["interpret_batched", "interpret_launch", "language_lock"]

# The interpreter keeps the grid position in a module-level builder and patches
# triton.language while it runs: one launch at a time per process (XLA may run host
# callbacks on several threads), and no GPU compile during one (.compile).
language_lock = threading.Lock()
_rewritten: dict[Any, Any] = {}


class _HostArray:
    """What the interpreter needs of an array: its address and its dtype."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.dtype = array.dtype

    def data_ptr(self) -> int:
        return int(self.array.ctypes.data)


def _scalar(triton_type: str, value: Any) -> Any:
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    storage = np.bool_ if triton_type == "i1" else SCALAR_STORAGE[triton_type]
    data = np.array([value], dtype=storage)
    ty = tl.str_to_ty(triton_type, None)
    assert isinstance(ty, tl.dtype)  # a scalar type name gives a scalar dtype
    return tl.tensor(TensorHandle(data, ty), ty)


def _executor(jit_fn: Any, grid: tuple[int, int, int]) -> Any:
    from triton.runtime.interpreter import GridExecutor

    class _HostGridExecutor(GridExecutor):
        # Our arrays are host memory already: nothing to copy there and back.
        def _init_args_hst(self, args_dev: Any, kwargs: Any) -> Any:
            return args_dev, kwargs

        def _restore_args_dev(self, *args: Any) -> None:
            return None

    return _HostGridExecutor(_rewrite(jit_fn.fn), jit_fn.arg_names, grid)


def interpret_launch(
    jit_fn: Any,
    sig: TritonSignature,
    grid: tuple[int, int, int],
    buffers: Sequence[np.ndarray],
) -> None:
    """One launch of ``jit_fn`` over ``grid`` on C-contiguous host ``buffers``."""
    if 0 in grid:
        return
    args = [_HostArray(b) for b in buffers]
    args += [_scalar(t, v) for _, t, v in sig.scalars]
    # IEEE arithmetic as on a GPU: overflow to inf, NaN from inf * 0, no warnings.
    with language_lock, _helpers_interpreted(), np.errstate(all="ignore"):
        _executor(jit_fn, grid)(*args, **sig.constexprs)


def _rewrite(fn: Any) -> Any:
    from triton.runtime.interpreter import InterpretedFunction

    if fn not in _rewritten:
        _rewritten[fn] = InterpretedFunction(fn).rewrite()
    return _rewritten[fn]


@contextlib.contextmanager
def _helpers_interpreted() -> Iterator[None]:
    """Interpret ``@triton.jit`` functions the kernel calls (``tl.sum``, helpers).

    Without ``TRITON_INTERPRET`` those stay compiled-only ``JITFunction`` objects
    whose ``__call__`` refuses to run outside a kernel. For the duration of one
    launch (under the lock) a call runs the function's interpreted rewrite with
    the language patched for it, and restores the patch afterwards.
    """
    from triton.runtime import interpreter
    from triton.runtime.interpreter import _patch_lang
    from triton.runtime.jit import JITFunction

    original = JITFunction.__call__
    original_tensor_patch = getattr(interpreter, "_patch_lang_tensor", None)

    def tensor_patch(tensor: Any, scope: Any) -> None:
        # Triton <= 3.6 reads a scalar as int(data) where data has shape (1,), which
        # NumPy >= 2.4 refuses ("only 0-dimensional arrays ..."): `range(start,
        # end)` over loaded scalars failed. Newer Triton squeezes first; so do we.
        assert original_tensor_patch is not None  # installed only then (below)
        original_tensor_patch(tensor, scope)
        scope.set_attr(
            tensor, "__index__", lambda self: int(self.handle.data.squeeze())
        )

    def interpreted(self: Any, *args: Any, **kwargs: Any) -> Any:
        scope = _patch_lang(self.fn)
        try:
            return _rewrite(self.fn)(*args, **kwargs)
        finally:
            scope.restore()

    JITFunction.__call__ = interpreted
    if original_tensor_patch is not None:
        interpreter._patch_lang_tensor = tensor_patch
    try:
        yield
    finally:
        JITFunction.__call__ = original
        if original_tensor_patch is not None:
            interpreter._patch_lang_tensor = original_tensor_patch


def interpret_batched(
    jit_fn: Any,
    sig: TritonSignature,
    grid: tuple[int, int, int],
    compiled: Sequence[tuple[tuple[int, ...], str]],
    n_in: int,
    inputs: Sequence[np.ndarray],
    aliases: Mapping[int, int] | None = None,
) -> list[np.ndarray]:
    """Outputs of the kernel on ``inputs`` that may carry leading vmap axes.

    Args:
        compiled: ``(shape, dtype)`` of every input then output, as compiled.
        n_in: how many of them are inputs.
        inputs: the actual inputs (each with 0 or K leading axes, K the same for
            all batched ones, as ``vmap_method="expand_dims"`` passes them).
        aliases: ``{input index: output index}``: that output starts as the input
            (one buffer, as on the GPU), zeros otherwise.
    """
    inputs = [np.asarray(x) for x in inputs]
    pairs = list(zip(inputs, compiled[:n_in], strict=True))
    extra = max((x.ndim - len(shape) for x, (shape, _) in pairs), default=0)
    batch = [1] * extra
    for x, (shape, _) in pairs:
        if x.ndim - len(shape) == extra:
            batch = [max(b, d) for b, d in zip(batch, x.shape[:extra], strict=True)]
    sources = {o: i for i, o in (aliases or {}).items()}
    outputs = []
    for j, (shape, dtype) in enumerate(compiled[n_in:]):
        out = np.zeros((*batch, *shape), dtype=_dtype(dtype))
        if j in sources:
            out[...] = inputs[sources[j]]
        outputs.append(out)
    shapes = [x.shape for x in inputs] + [o.shape for o in outputs]
    plan = plan_batch([c[0] for c in compiled], n_in, shapes, sig.kernel)
    for element in plan.elements():
        views = [
            np.ascontiguousarray(x[plan.index(element, i)])
            for i, x in enumerate(inputs)
        ]
        slices = [o[plan.index(element, n_in + j)] for j, o in enumerate(outputs)]
        work = [np.ascontiguousarray(s) for s in slices]
        interpret_launch(jit_fn, sig, grid, views + work)
        for s, w in zip(slices, work, strict=True):
            if s is not w:
                s[...] = w
    return outputs
