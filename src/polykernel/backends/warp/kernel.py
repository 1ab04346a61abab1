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
(``cpu_handler``); on a GPU it is our native launcher running Warp's ahead-of-time
CUDA build (``gpu_build``). See ``docs/warp.md``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...call_spec import VMAP_METHODS, kernel_aliases, kernel_outs
from ...errors import KernelRegistrationError, KernelTypeError
from ...ffi.handler_ir.signature import Signature
from .call_check import check_arrays, scalar_attributes
from .plan import describe_kernel
from .platform import current_platform
from .types import import_warp, warp_dtype_name

__all__ = ["VMAP_METHODS", "WarpKernel", "warp_kernel"]


def warp_kernel(
    kernel: Any,
    outs: Any,
    *,
    launch_dims: int | Sequence[int] | None = None,
    vmap_method: str | None = None,
    input_output_aliases: dict[int, int] | None = None,
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
        >>> import jax, jax.numpy as jnp, warp as wp        # doctest: +SKIP
        >>> @wp.kernel
        ... def add(x: wp.array(dtype=float), y: wp.array(dtype=float),
        ...         out: wp.array(dtype=float)):
        ...     i = wp.tid()
        ...     out[i] = x[i] + y[i]                          # doctest: +SKIP
        >>> f = warp_kernel(add, jax.ShapeDtypeStruct((3,), jnp.float32))
        >>> f(jnp.ones(3), jnp.ones(3)).tolist()              # doctest: +SKIP
        [2.0, 2.0, 2.0]
    """
    return WarpKernel(kernel, outs, launch_dims, vmap_method, input_output_aliases)


def _normalize_launch(name: str, launch_dims: Any) -> tuple[int, ...] | None:
    if launch_dims is None:
        return None
    dims = (launch_dims,) if isinstance(launch_dims, int | np.integer) else launch_dims
    try:
        dims = tuple(int(d) for d in dims)
    except TypeError:
        dims = ()
    if not 1 <= len(dims) <= 4 or any(d < 0 or d >= 2**31 for d in dims):
        raise KernelRegistrationError(
            f"warp_kernel '{name}': launch_dims must be an int or 1 to 4 ints in "
            f"[0, 2**31), got {launch_dims!r}."
        )
    return dims


class WarpKernel:
    """The callable :func:`warp_kernel` returns (one per kernel, ``outs`` and grid)."""

    def __init__(self, kernel, outs, launch_dims, vmap_method, aliases) -> None:
        wp = import_warp()
        if not isinstance(kernel, wp.Kernel):
            raise KernelTypeError(
                f"warp_kernel: expected a @wp.kernel, got {type(kernel).__name__} "
                f"{getattr(kernel, '__qualname__', kernel)!r}. Decorate the function "
                f"with @warp.kernel."
            )
        self.kernel = kernel
        self.name = kernel.key
        self.plan = describe_kernel(kernel)
        where = f"warp_kernel '{self.name}'"
        self.out_specs, self._single = kernel_outs(
            where, outs, lambda what, dt: warp_dtype_name(dt, f"{where}: {what}")
        )
        self.launch_dims = _normalize_launch(self.name, launch_dims)
        self.aliases = kernel_aliases(where, vmap_method, aliases, len(self.out_specs))
        self.vmap_method = vmap_method or (
            "broadcast_all" if self.aliases else "expand_dims"
        )
        self._targets: dict[Any, tuple[str, dict[str, Any]]] = {}
        self._eager: dict[Any, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"warp_kernel({self.name}, outs={list(self.out_specs)})"

    def __call__(self, *args: Any, **attrs: Any) -> Any:
        """Run the kernel on ``args``; keyword arguments are scalar parameters."""
        import jax

        if any(isinstance(a, jax.core.Tracer) for a in args):
            return self.bind(*args, **attrs)
        args = tuple(jax.numpy.asarray(a) for a in args)
        values = scalar_attributes(self.name, self.plan, attrs)
        key = (
            tuple((a.shape, a.dtype) for a in args),
            tuple((n, v.dtype.str, v.item()) for n, v in values),
            current_platform(),
        )
        fn = self._eager.get(key)
        if fn is None:
            fn = jax.jit(functools.partial(self._bind, values=values))
            with self._lock:
                if len(self._eager) >= 64:
                    self._eager.pop(next(iter(self._eager)))
                self._eager[key] = fn
        return fn(*args)

    def bind(self, *args: Any, **attrs: Any) -> Any:
        """Emit the custom call (the traced path used under ``jax.jit``)."""
        return self._bind(*args, values=scalar_attributes(self.name, self.plan, attrs))

    def _bind(self, *args: Any, values: tuple[tuple[str, Any], ...]) -> Any:
        import jax

        for i in self.aliases:
            if not (isinstance(i, int) and 0 <= i < len(args)):
                raise KernelRegistrationError(
                    f"warp_kernel '{self.name}': input_output_aliases names input "
                    f"{i!r}, but the call has {len(args)} inputs."
                )
        shapes = check_arrays(self.name, self.plan, args, self.out_specs)
        sig = Signature(
            tuple(
                (np.dtype(a.dtype).name, len(s))
                for a, s in zip(args, shapes, strict=True)
            ),
            tuple((np.dtype(o.dtype).name, len(o.shape)) for o in self.out_specs),
            tuple((n, v.dtype.name) for n, v in values),
            half="bits",  # float16 buffers reach Warp as they are
            aliases=tuple(sorted(self.aliases.items())),
        )
        platform = current_platform()
        # On CUDA the scalars are baked into the launch template: part of the key.
        baked = () if platform == "cpu" else tuple((n, v.item()) for n, v in values)
        key = (platform, sig, tuple(shapes), baked)
        found = self._targets.get(key)
        if found is None:
            if platform == "cpu":
                from .cpu_target import cpu_target

                found = cpu_target(self, sig, shapes)
            else:
                from .gpu_target import gpu_target

                found = gpu_target(self, sig, shapes, values)
            self._targets[key] = found
        target, extra = found
        call = jax.ffi.ffi_call(
            target,
            list(self.out_specs),
            vmap_method=self.vmap_method,
            input_output_aliases=self.aliases or None,
        )
        attrs = extra if platform != "cpu" else dict(values)
        out = call(*args, **attrs)
        return out[0] if self._single else tuple(out)
