"""``triton_kernel``: a ``@triton.jit`` kernel as a JAX callable, on GPU and on CPU.

The kernel takes one pointer per input, one per output, then its other parameters
(scalars and ``tl.constexpr``), which come from keywords of :func:`triton_kernel`
or of the call::

    @triton.jit
    def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=m)
                 + tl.load(y_ptr + offs, mask=m), mask=m)

    f = triton_kernel(axpy, jax.ShapeDtypeStruct((n,), jnp.float32),
                      grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
                      BLOCK=128)
    out = f(x, y, n=n, alpha=2.0)

* **GPU** (lowering for ``gpu``, or JAX's default backend is a GPU): the kernel is
  compiled by Triton for the device's architecture when the call is traced, and the
  custom call goes to polykernel's native launcher (``polykernel.launcher``), which
  launches the cubin on XLA's stream: no Python per call, CUDA-graph capturable,
  no jax-triton. Scalars are baked into the launch (a new value is a new launch
  spec, not a new compile).
* **CPU**: the kernel runs in Triton's interpreter (see :mod:`.cpu`),
  through ``jax.pure_callback``; for tests and small problems, not for speed.

Both paths batch under ``jax.vmap`` by the wrapper's ``vmap_method`` (default
``"expand_dims"``: one launch per batch element, the launcher's loop on GPU, a
Python loop on CPU). Keywords of the call are bound to the parameters after the
pointers (scalars typed by value, constexprs static) by the core's one rule. Kernels
decorated while ``TRITON_INTERPRET=1`` is set (Triton's own way to run on a CPU) work
the same (:mod:`.source`). See ``docs/triton.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...contract.kernel import BackendKernel
from ...contract.launch import (
    launch_count,
    launch_shape,
    power_of_two,
    size_of,
    three_axes,
)
from ...contract.outs import OutSpec
from ...contract.parameters import INFERRED, STATIC, Parameters
from ...contract.scalars import Scalars
from ...platforms import Platform
from ...types import LaunchDims, Outs, VmapMethod
from .gpu import gpu_kernel, target_arch
from .params import POINTER_DTYPES, TritonSignature, build_signature, scalar_dtype
from .source import import_triton, kernel_source

__all__ = ["TritonKernel", "import_triton", "target_arch", "triton_kernel"]


def triton_kernel(
    fn: Any,
    outs: Outs,
    *,
    grid: LaunchDims | Callable[[dict[str, Any]], LaunchDims],
    num_warps: int = 4,
    num_stages: int = 3,
    vmap_method: VmapMethod | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
    **constexprs: Any,
) -> TritonKernel:
    """Wrap a ``@triton.jit`` kernel as a JAX callable (native launch on GPU).

    Args:
        fn: A ``@triton.jit`` function taking ``(*input_ptrs, *output_ptrs, *rest)``.
        outs: One ``jax.ShapeDtypeStruct``-like (one returned array) or a list/tuple
            of them (a tuple is returned).
        grid: Program grid: an int, a tuple of up to 3 ints, or a callable taking
            ``meta`` (the constexprs and scalars by name) and returning one.
        num_warps: Warps per program (a power of two); 32 * num_warps threads.
        num_stages: Software-pipelining stages Triton uses for loops.
        vmap_method: How ``jax.vmap`` calls the kernel (every wrapper's vocabulary);
            ``None`` means ``"expand_dims"`` (``"broadcast_all"`` with aliases).
        input_output_aliases: ``{input index: output index}``: the output starts
            as that input (an in-place kernel reads and writes it).
        **constexprs: Values of the kernel's ``tl.constexpr`` parameters (a plain
            parameter given here is a fixed scalar).

    Returns:
        A callable ``f(*arrays, **scalars)``, usable eagerly, under ``jax.jit`` and
        ``jax.vmap``, and as what a kernel generator returns.

    Raises:
        BackendUnavailableError: Triton is not installed (an ``ImportError``).
        KernelTypeError: ``fn`` is not a ``@triton.jit`` function (one decorated
            under ``TRITON_INTERPRET=1`` is).
        KernelRegistrationError: ``outs``, ``grid``, ``num_warps``,
            ``num_stages``, ``vmap_method`` or ``input_output_aliases`` is invalid.

    Example:
        >>> import jax, jax.numpy as jnp, triton, triton.language as tl
        >>> from polykernel import triton_kernel
        >>> @triton.jit
        ... def double(x_ptr, out_ptr, BLOCK: tl.constexpr):
        ...     offs = tl.arange(0, BLOCK)
        ...     tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs))
        >>> f = triton_kernel(double, jax.ShapeDtypeStruct((4,), jnp.float32),
        ...                   grid=1, BLOCK=4)
        >>> f(jnp.arange(4.0)).tolist()  # on CPU: Triton's interpreter
        [0.0, 2.0, 4.0, 6.0]
    """
    return TritonKernel(fn, outs, grid, num_warps, num_stages, constexprs,
                        vmap_method, input_output_aliases)  # fmt: skip


def _grid3(where: str, grid: Any) -> tuple[int, int, int]:
    dims = launch_shape(where, "grid", grid, max_rank=3,
                        alternative="a callable meta -> such a tuple")  # fmt: skip
    return three_axes(dims)


def _parameters(source: Any, given: dict[str, Any]) -> Parameters:
    """One pointer per input and output, then scalars (typed by value) and
    ``tl.constexpr`` values (static); those given to ``triton_kernel`` are
    optional in the call."""
    dtypes = {n: STATIC if n in source.constexpr_names else INFERRED
              for n in source.arg_names}  # fmt: skip
    return Parameters(
        Parameters.declared(dtypes, optional=given).entries, leading="buffers"
    )


class TritonKernel(BackendKernel):
    """The callable :func:`triton_kernel` returns."""

    backend = "triton"

    def __init__(
        self,
        fn: Any,
        outs: Any,
        grid: Any,
        num_warps: int,
        num_stages: int,
        constexprs: dict[str, Any],
        vmap_method: VmapMethod | None = None,
        input_output_aliases: Mapping[int, int] | None = None,
    ) -> None:
        self.source = kernel_source(fn)
        super().__init__(
            "triton_kernel",
            self.source.name,
            outs,
            platforms=(Platform.CPU, Platform.GPU),
            vmap_method=vmap_method,
            input_output_aliases=input_output_aliases,
            parameters=_parameters(self.source, constexprs),
            out_dtypes=POINTER_DTYPES,
        )
        self.fn = self.source.kernel
        if not callable(grid):
            _grid3(self.where, grid)
        self.grid = grid
        self.num_warps = power_of_two(self.where, "num_warps", num_warps)
        self.num_stages = launch_count(self.where, "num_stages", num_stages,
                                       minimum=1, maximum=16)  # fmt: skip
        self.arg_names = self.source.arg_names
        self.constexpr_names = self.source.constexpr_names
        # Values given here are the defaults of the call's keywords: a plain
        # parameter's is a fixed scalar, converted as the call's scalars are.
        self.constexprs = dict(self.convert_values(constexprs))

    # -- what a call compiles -------------------------------------------------------
    def signature(self, in_dtypes: Sequence[str], scalars: dict[str, Any]) -> Any:
        """The :class:`TritonSignature` of a call with these input dtypes/scalars."""
        dtypes = [*in_dtypes, *(np.dtype(s.dtype).name for s in self.out_specs)]
        return build_signature(
            self.name, self.arg_names, self.constexpr_names, dtypes, scalars,
            self.constexprs,
        )  # fmt: skip

    def launch_grid(self, sig: TritonSignature) -> tuple[int, int, int]:
        """The grid of a call: ``grid``, or ``grid(meta)`` for a callable."""
        if not callable(self.grid):
            return _grid3(self.where, self.grid)
        meta = {**{n: v for n, _, v in sig.scalars}, **sig.constexprs}
        return _grid3(self.where, self.grid(meta))

    # -- the backend's half of the contract -------------------------------------------
    def infer_dtype(self, value: Any) -> Any:
        """Triton's own launcher rule (:func:`.params.scalar_dtype`): an ``int`` is
        int32 when it fits, a ``float`` float32."""
        return scalar_dtype(value)

    def launches_nothing(self, arrays: Sequence[Any], scalars: Scalars) -> bool:
        return size_of(self.launch_grid(self._signature(arrays, scalars))) == 0

    def _signature(self, arrays: Sequence[Any], scalars: Scalars) -> TritonSignature:
        return self.signature([np.dtype(x.dtype).name for x in arrays], dict(scalars))

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        sig = self._signature(arrays, scalars)
        grid = self.launch_grid(sig)
        if platform == Platform.GPU:
            return self._gpu(list(arrays), sig, grid)
        return self._cpu(list(arrays), sig, grid)

    def _cpu(self, arrays: list[Any], sig: TritonSignature, grid: Any) -> list[Any]:
        import jax

        from .cpu import interpret_batched

        compiled = [(tuple(x.shape), np.dtype(x.dtype).name) for x in arrays]
        compiled += [(tuple(s.shape), np.dtype(s.dtype).name) for s in self.out_specs]
        n_in = len(arrays)

        def host(*inputs: Any) -> list[np.ndarray]:
            return interpret_batched(self.fn, sig, grid, compiled, n_in, inputs,
                                     self.aliases)  # fmt: skip

        return list(
            jax.pure_callback(
                host, list(self.out_specs), *arrays, vmap_method=self.vmap_method
            )
        )

    def _gpu(self, arrays: list[Any], sig: TritonSignature, grid: Any) -> list[Any]:
        kernel = self.gpu_kernel([(tuple(x.shape), x.dtype) for x in arrays], sig,
                                 grid)  # fmt: skip
        results = kernel(*arrays, vmap_method=self.vmap_method,
                         input_output_aliases=self.aliases or None)  # fmt: skip
        return results[: len(self.out_specs)]  # drop the scratch buffer, if any

    def gpu_kernel(
        self,
        inputs: Sequence[tuple[tuple[int, ...], Any]],
        sig: TritonSignature,
        grid: tuple[int, int, int],
        arch: str | None = None,
    ) -> Any:
        """Compile for ``arch`` (default: the GPU's) and register with the launcher
        (see :func:`.gpu.gpu_kernel`)."""
        return gpu_kernel(self, inputs, sig, grid, arch)

    def __repr__(self) -> str:
        return f"TritonKernel({self.name}, outs={list(self.out_specs)})"
