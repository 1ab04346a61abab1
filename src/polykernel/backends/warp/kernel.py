"""``warp_kernel``: run a ``@wp.kernel`` inside XLA, shaped like ``numba_kernel``.

The kernel's array parameters receive the inputs, then the outputs (written in
place); a parameter named like a keyword of the call receives that scalar::

    @wp.kernel
    def axpy(x: wp.array(dtype=float), y: wp.array(dtype=float), alpha: float,
             out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = alpha * x[i] + y[i]

    f = warp_kernel(axpy, jax.ShapeDtypeStruct((n,), jnp.float32))
    f(x, y, alpha=2.0)

On CPU the call is an FFI handler that calls Warp's compiled CPU entry point
(``cpu_target``: one shared object with Warp's build, cached); on a GPU it is our
native launcher running Warp's ahead-of-time CUDA build (``gpu_build``). See
``docs/warp.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...contract.kernel import BackendKernel
from ...contract.launch import MAX_DIM, launch_shape, size_of
from ...contract.outs import OutSpec
from ...contract.scalars import Scalars
from ...errors import KernelTypeError
from ...ffi.handler_ir.signature import Signature
from ...platforms import Platform
from ...types import Outs, VmapMethod
from .call_check import check_arrays, declared_scalars
from .plan import array_shape, describe_kernel
from .types import WARP_DTYPES, import_warp

__all__ = ["WarpKernel", "warp_kernel"]


def warp_kernel(
    kernel: Any,
    outs: Outs,
    *,
    launch_dims: int | Sequence[int] | None = None,
    vmap_method: VmapMethod | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
) -> WarpKernel:
    """Wrap a Warp kernel as a JAX-callable XLA FFI custom call.

    Args:
        kernel: A ``@wp.kernel`` with concrete annotations. Its array parameters
            take ``(*inputs, *outputs)`` in order; its scalar parameters take the
            call's keywords of the same name.
        outs: One ``jax.ShapeDtypeStruct``-like (one returned array) or a
            list/tuple of them (a tuple).
        launch_dims: The launch grid (an int or up to 4 ints). ``None`` (default)
            launches over the shape of the first array parameter, like Warp's
            ``jax_kernel``.
        vmap_method: ``"sequential"``, ``"sequential_unrolled"``, ``"expand_dims"``
            or ``"broadcast_all"``; every one gives the per-slice result (the
            handler loops over batch dims). ``None`` means ``"expand_dims"``
            (``"broadcast_all"`` with aliases).
        input_output_aliases: ``{input index: output index}`` for in-place updates.

    Returns:
        A callable ``f(*arrays, **scalars)``: eager, under ``jax.jit`` and
        ``jax.vmap``, on CPU (Warp's CPU device) and on CUDA GPUs.

    Raises:
        BackendUnavailableError: (an ``ImportError``) Warp is not installed.
        KernelTypeError: ``kernel`` is not a Warp kernel or has a parameter type
            polykernel cannot pass.
        KernelRegistrationError: ``outs``, ``launch_dims``, ``vmap_method`` or
            ``input_output_aliases`` is invalid.

    Example:
        >>> import jax, jax.numpy as jnp, warp as wp
        >>> from polykernel import warp_kernel
        >>> @wp.kernel
        ... def add(x: wp.array(dtype=float), y: wp.array(dtype=float),
        ...         out: wp.array(dtype=float)):
        ...     i = wp.tid()
        ...     out[i] = x[i] + y[i]
        >>> f = warp_kernel(add, jax.ShapeDtypeStruct((3,), jnp.float32))
        >>> f(jnp.ones(3), jnp.ones(3)).tolist()  # on the CPU: Warp's CPU device
        [2.0, 2.0, 2.0]
    """
    return WarpKernel(kernel, outs, launch_dims, vmap_method, input_output_aliases)


class WarpKernel(BackendKernel):
    """The callable :func:`warp_kernel` returns (one per kernel, ``outs`` and grid)."""

    backend = "warp"

    def __init__(self, kernel, outs, launch_dims, vmap_method, aliases) -> None:
        wp = import_warp()
        if not isinstance(kernel, wp.Kernel):
            raise KernelTypeError(
                f"warp_kernel: expected a @wp.kernel, got {type(kernel).__name__} "
                f"{getattr(kernel, '__qualname__', kernel)!r}. Decorate the function "
                f"with @warp.kernel."
            )
        plan = describe_kernel(kernel)
        super().__init__(
            "warp_kernel",
            kernel.key,
            outs,
            platforms=(Platform.CPU, Platform.GPU),
            vmap_method=vmap_method,
            input_output_aliases=aliases,
            # Scalar parameters by annotation; the others take the arrays in order.
            parameters=declared_scalars(kernel.key, plan),
            out_dtypes=WARP_DTYPES,
        )
        self.kernel = kernel
        self.plan = plan
        self.launch_dims = None
        if launch_dims is not None:
            self.launch_dims = launch_shape(
                self.where, "launch_dims", launch_dims, max_rank=4, maximum=MAX_DIM
            )

    # -- the backend's half of the contract -------------------------------------------
    def prepare(self, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec) -> None:
        check_arrays(self.name, self.plan, arrays, outs.structs)

    def launches_nothing(self, arrays: Sequence[Any], scalars: Scalars) -> bool:
        if self.launch_dims is not None:
            return size_of(self.launch_dims) == 0
        first = [*arrays, *self.out_specs][0] if (arrays or self.out_specs) else None
        return first is not None and size_of(array_shape(first.shape)) == 0

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        import jax

        shapes = [tuple(a.shape) for a in arrays]
        sig = Signature(
            tuple(
                (np.dtype(a.dtype).name, len(s))
                for a, s in zip(arrays, shapes, strict=True)
            ),
            tuple((np.dtype(o.dtype).name, len(o.shape)) for o in self.out_specs),
            tuple((n, v.dtype.name) for n, v in scalars),
            half="bits",  # float16 buffers reach Warp as they are
            aliases=tuple(sorted(self.aliases.items())),
        )
        # On CUDA the scalars are baked into the launch template: part of the key.
        baked = (
            () if platform == Platform.CPU else tuple((n, v.item()) for n, v in scalars)
        )
        key = (platform, sig, tuple(shapes), baked)
        target, extra = self.built(
            key, lambda: self._build_target(platform, sig, shapes, scalars)
        )
        call = jax.ffi.ffi_call(
            target,
            list(outs.structs),
            vmap_method=self.vmap_method,
            input_output_aliases=self.aliases or None,
        )
        attrs = dict(scalars) if platform == Platform.CPU else extra
        return list(call(*arrays, **attrs))

    def _build_target(self, platform, sig, shapes, scalars) -> tuple[str, dict]:
        if platform == Platform.CPU:
            from .cpu_target import cpu_target

            return cpu_target(self, sig, shapes)
        from .gpu_target import gpu_target

        return gpu_target(self, sig, shapes, scalars)
