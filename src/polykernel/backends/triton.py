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
  custom call goes to polykernel's native launcher (``polykernel.gpu``), which
  launches the cubin on XLA's stream: no Python per call, CUDA-graph capturable,
  no jax-triton. Scalars are baked into the launch (a new value is a new launch
  spec, not a new compile).
* **CPU**: the kernel runs in Triton's interpreter (see :mod:`._triton_interp`),
  through ``jax.pure_callback``; for tests and small problems, not for speed.

Both paths batch under ``jax.vmap`` with ``vmap_method="expand_dims"`` semantics: one
launch per batch element (the launcher's loop on GPU, a Python loop on CPU).
See ``docs/triton.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..call_spec import kernel_outs
from ..errors import (
    BackendUnavailableError,
    KernelRegistrationError,
    KernelTypeError,
    UnsupportedOperationError,
)
from ..platform_context import current_platform, gpu_visible, lowering_platform
from ._triton_params import TritonSignature, build_signature, launch_params

__all__ = ["TritonKernel", "import_triton", "target_arch", "triton_kernel"]

VMAP_METHOD = "expand_dims"


def import_triton() -> Any:
    """Import Triton, or raise an ImportError naming the extra to install."""
    try:
        import triton
    except ImportError as err:
        raise BackendUnavailableError(
            "triton_kernel: Triton is not installed; install it with "
            "pip install 'polykernel[triton]'."
        ) from err
    return triton


def triton_kernel(
    fn: Any,
    outs: Any,
    *,
    grid: Any,
    num_warps: int = 4,
    num_stages: int = 3,
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
        **constexprs: Values of the kernel's ``tl.constexpr`` parameters (a plain
            parameter given here is a fixed scalar).

    Returns:
        A callable ``f(*arrays, **scalars)``, usable eagerly, under ``jax.jit`` and
        ``jax.vmap``, and as what a kernel generator returns.

    Raises:
        BackendUnavailableError: Triton is not installed (an ``ImportError``).
        KernelTypeError: ``fn`` is not a ``@triton.jit`` function.
        KernelRegistrationError: ``outs``, ``grid``, ``num_warps`` or
            ``num_stages`` is invalid.

    Example:
        >>> import jax, jax.numpy as jnp, triton, triton.language as tl
        >>> @triton.jit
        ... def double(x_ptr, out_ptr, BLOCK: tl.constexpr):
        ...     offs = tl.arange(0, BLOCK)
        ...     tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs))
        >>> f = triton_kernel(double, jax.ShapeDtypeStruct((4,), jnp.float32),
        ...                   grid=1, BLOCK=4)
        >>> f(jnp.arange(4.0)).tolist()  # on CPU: Triton's interpreter
        [0.0, 2.0, 4.0, 6.0]
    """
    return TritonKernel(fn, outs, grid, num_warps, num_stages, constexprs)


def target_arch() -> str:
    """The architecture to compile for: the pin, ``$POLYKERNEL_CUDA_ARCH``, JAX's GPU.

    ``polykernel.config.set_compute_capability`` and the environment variable win
    (first entry); otherwise the first GPU JAX sees, else ``nvidia-smi``.

    Raises:
        GpuArchDetectionError: nothing pinned and no GPU to ask.
    """
    import os

    from ..cuda_arch import normalize_arch
    from ..native.toolchain import ARCH_ENV, cuda_arches
    from ..preferences import pinned_cuda_arches

    if not (pinned_cuda_arches() or os.environ.get(ARCH_ENV, "").strip()):
        import jax

        try:
            capability = jax.devices("gpu")[0].compute_capability
        except (RuntimeError, AttributeError, IndexError):
            capability = None
        if capability:
            return normalize_arch(capability)
    return cuda_arches(None)[0]


def _grid3(name: str, grid: Any) -> tuple[int, int, int]:
    dims = (grid,) if isinstance(grid, (int, np.integer)) else grid
    ok = isinstance(dims, Sequence) and 1 <= len(dims) <= 3
    ok = ok and all(isinstance(d, (int, np.integer)) and d >= 0 for d in dims)
    if not ok:
        raise KernelRegistrationError(
            f"triton_kernel '{name}': grid must be an int, a tuple of 1 to 3 "
            f"non-negative ints, or a callable meta -> such a tuple; got {grid!r}."
        )
    return (*(int(d) for d in dims), *(1,) * (3 - len(dims)))  # type: ignore[return-value]


class TritonKernel:
    """The callable :func:`triton_kernel` returns."""

    def __init__(
        self,
        fn: Any,
        outs: Any,
        grid: Any,
        num_warps: int,
        num_stages: int,
        constexprs: dict[str, Any],
    ) -> None:
        import_triton()
        from triton.runtime.jit import JITFunction

        self.name = getattr(fn, "__name__", type(fn).__name__)
        if not isinstance(fn, JITFunction):
            raise KernelTypeError(
                f"triton_kernel: expected a @triton.jit function, got "
                f"{type(fn).__name__} '{self.name}'. Decorate the kernel with "
                f"@triton.jit (autotuned kernels: pass the inner @triton.jit "
                f"function and fixed meta-parameters)."
            )
        self.fn = fn
        self.out_specs, self._single = kernel_outs(f"triton_kernel '{self.name}'", outs)
        if not callable(grid):
            _grid3(self.name, grid)
        self.grid = grid
        if not (isinstance(num_warps, int) and num_warps > 0):
            ok = False
        else:
            ok = num_warps & (num_warps - 1) == 0
        if not ok:
            raise KernelRegistrationError(
                f"triton_kernel '{self.name}': num_warps must be a power of two "
                f"(1, 2, 4, 8, ...), got {num_warps!r}."
            )
        if not (isinstance(num_stages, int) and num_stages >= 1):
            raise KernelRegistrationError(
                f"triton_kernel '{self.name}': num_stages must be an int >= 1, got "
                f"{num_stages!r}."
            )
        self.num_warps, self.num_stages = num_warps, num_stages
        self.constexprs = dict(constexprs)
        self.arg_names = list(fn.arg_names)
        self.constexpr_names = {p.name for p in fn.params if p.is_constexpr}

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
            return _grid3(self.name, self.grid)
        meta = {**{n: v for n, _, v in sig.scalars}, **sig.constexprs}
        return _grid3(self.name, self.grid(meta))

    # -- calling --------------------------------------------------------------------
    def __call__(self, *args: Any, **scalars: Any) -> Any:
        import jax.numpy as jnp

        arrays = [x if hasattr(x, "aval") else jnp.asarray(x) for x in args]
        sig = self.signature([np.dtype(x.dtype).name for x in arrays], scalars)
        grid = self.launch_grid(sig)
        platform = lowering_platform()
        if platform is None and gpu_visible():
            # Used on its own where JAX has a GPU: the data decides where it runs.
            import jax

            results = jax.lax.platform_dependent(
                *arrays,
                cpu=lambda *xs: self._cpu(list(xs), sig, grid),
                cuda=lambda *xs: self._gpu(list(xs), sig, grid),
            )
        elif (platform := platform or current_platform()) == "gpu":
            results = self._gpu(arrays, sig, grid)
        elif platform == "cpu":
            results = self._cpu(arrays, sig, grid)
        else:
            raise UnsupportedOperationError(
                f"triton_kernel '{self.name}': no Triton path for platform "
                f"'{platform}'; Triton runs on CUDA GPUs (and on CPU through its "
                "interpreter)."
            )
        return results[0] if self._single else tuple(results)

    def _cpu(self, arrays: list[Any], sig: TritonSignature, grid: Any) -> list[Any]:
        import jax

        from ._triton_interp import interpret_batched

        compiled = [(tuple(x.shape), np.dtype(x.dtype).name) for x in arrays]
        compiled += [(tuple(s.shape), np.dtype(s.dtype).name) for s in self.out_specs]
        n_in = len(arrays)

        def host(*inputs: Any) -> list[np.ndarray]:
            return interpret_batched(self.fn, sig, grid, compiled, n_in, inputs)

        return list(
            jax.pure_callback(
                host, list(self.out_specs), *arrays, vmap_method=VMAP_METHOD
            )
        )

    def _gpu(self, arrays: list[Any], sig: TritonSignature, grid: Any) -> list[Any]:
        kernel = self.gpu_kernel([(tuple(x.shape), x.dtype) for x in arrays], sig,
                                 grid)  # fmt: skip
        results = kernel(*arrays, vmap_method=VMAP_METHOD)
        return results[: len(self.out_specs)]  # drop the scratch buffer, if any

    def gpu_kernel(
        self,
        inputs: Sequence[tuple[tuple[int, ...], Any]],
        sig: TritonSignature,
        grid: tuple[int, int, int],
        arch: str | None = None,
    ) -> Any:
        """Compile for ``arch`` (default: the GPU's) and register with the launcher.

        Returns the :class:`~polykernel.gpu.GpuKernel`; needs no GPU when ``arch``
        is given (which is how the compile-level tests run).
        """
        from ..gpu import BufferSpec, LaunchSpec, register_gpu_kernel
        from ._triton_compile import compile_triton

        arch = arch or target_arch()
        compiled = compile_triton(self.fn, sig, arch, self.num_warps, self.num_stages)
        buffers = [BufferSpec(np.dtype(d).name, tuple(s)) for s, d in inputs]
        buffers += [BufferSpec(np.dtype(o.dtype).name, tuple(o.shape))
                    for o in self.out_specs]  # fmt: skip
        scratch = None
        if compiled.global_scratch_size > 0:
            # Triton's per-program scratch becomes one more (discarded) output.
            scratch = len(buffers)
            size = math.prod(grid) * compiled.global_scratch_size
            buffers.append(BufferSpec("uint8", (size,)))
        if compiled.profile_scratch_size > 0:
            raise UnsupportedOperationError(
                f"triton_kernel '{self.name}': the kernel was compiled with profiling "
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
                                   name=f"triton:{self.name}")  # fmt: skip

    def __repr__(self) -> str:
        return f"TritonKernel({self.name}, outs={list(self.out_specs)})"
