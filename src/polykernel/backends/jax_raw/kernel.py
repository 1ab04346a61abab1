"""``jax_raw_kernel``: a pure-JAX function as a kernel, under every backend's rules.

A ``jax_raw`` kernel is a JAX function of the inputs returning the outputs (what a
generator registered with ``def_jax_raw_kernel`` returns). Wrapped with
:func:`jax_raw_kernel`, it goes through the backend contract like a kernel of any
other technology: ``outs`` is normalised and what the function returns is checked
against it, its keywords are bound to the function's own parameters (static
values, passed as they are: JAX traces the function with them), ``vmap_method``
and aliases are checked by the same rules. Nothing is built: ``emit`` calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...contract.kernel import BackendKernel
from ...contract.outs import OutSpec, is_struct
from ...contract.parameters import STATIC, Parameters
from ...contract.scalars import Scalars
from ...errors import KernelTypeError
from ...platforms import Platform
from ...types import Outs, VmapMethod

__all__ = ["JaxRawKernel", "jax_raw_kernel"]


def jax_raw_kernel(
    fn: Callable[..., Any],
    outs: Outs,
    *,
    vmap_method: VmapMethod | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
) -> JaxRawKernel:
    """Wrap a JAX function of the inputs as a kernel of the ``jax_raw`` backend.

    Args:
        fn: ``fn(*inputs, **static) -> output(s)``, traceable by JAX.
        outs: One ``jax.ShapeDtypeStruct``-like (one returned array) or a
            list/tuple of them (a tuple); ``fn`` must return exactly these.
        vmap_method: Checked like every wrapper's (JAX batches ``fn`` itself).
        input_output_aliases: ``{input index: output index}``, checked likewise.

    Returns:
        A callable ``f(*arrays, **static)``, on every platform.

    Raises:
        KernelTypeError: ``fn`` is not callable.
        KernelRegistrationError: ``outs``, ``vmap_method`` or
            ``input_output_aliases`` is invalid.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from polykernel.backends.jax_raw.kernel import jax_raw_kernel
        >>> f = jax_raw_kernel(lambda x, alpha: alpha * x,
        ...                    jax.ShapeDtypeStruct((3,), jnp.float32))
        >>> f(jnp.arange(3.0), alpha=2.0).tolist()
        [0.0, 2.0, 4.0]
    """
    return JaxRawKernel(fn, outs, vmap_method, input_output_aliases)


class JaxRawKernel(BackendKernel):
    """The callable :func:`jax_raw_kernel` returns."""

    backend = "jax_raw"

    def __init__(self, fn, outs, vmap_method, input_output_aliases) -> None:
        if not callable(fn):
            raise KernelTypeError(
                f"jax_raw_kernel: fn must be a JAX function of the inputs (got "
                f"{type(fn).__name__}: {fn!r:.60})."
            )
        super().__init__(
            "jax_raw_kernel",
            getattr(fn, "__name__", type(fn).__name__),
            outs,
            platforms=(Platform.CPU, Platform.GPU, Platform.TPU),
            vmap_method=vmap_method,
            input_output_aliases=input_output_aliases,
            # The inputs fill the leading parameters (outputs are returned); the
            # keywords are Python values JAX traces the function with.
            parameters=Parameters.of_function(
                fn, leading="inputs", dtype=STATIC, accept_var_keyword=True
            ),
        )
        self.fn = fn

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        import jax

        result = self.fn(*arrays, **dict(scalars))
        if is_struct(result):
            return [result]
        return jax.tree.leaves(result)
