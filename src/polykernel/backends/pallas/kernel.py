"""``pallas_kernel``: a Pallas kernel body as the kernel of an ``XLACustomKernel``.

The helper builds the ``pallas_call`` for the platform being lowered, so one kernel
generator serves every platform it is registered for::

    def add(x_ref, y_ref, o_ref):          # inputs first, then outputs (refs)
        o_ref[...] = x_ref[...] + y_ref[...]

    def generator(outs, **kw):
        return pk.pallas_kernel(add, outs[0])

    op.def_pallas_kernel("cpu", generator)  # interpret mode: runs everywhere
    op.def_pallas_kernel("gpu", generator)  # Triton, on XLA's stream

Per platform: ``'cpu'`` runs the body in Pallas interpret mode (a debugging path: the
body becomes ordinary XLA operations; compiler parameters are ignored); ``'gpu'``
lowers through Pallas' Triton backend (``**compiler_params`` go to
``jax.experimental.pallas.triton.CompilerParams``: ``num_warps``, ``num_stages``);
``'tpu'`` lowers through Mosaic (``jax.experimental.pallas.tpu.CompilerParams``).
Parameters that only another platform's class takes are ignored, so one call works
for GPU and TPU. See ``docs/pallas.md``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ... import _jax_compat as jc
from ...contract.kernel import BackendKernel
from ...contract.launch import launch_shape, size_of
from ...contract.outs import OutSpec
from ...contract.parameters import STATIC, Parameters
from ...contract.platform_context import current_platform, lowering_platform
from ...contract.scalars import Scalars
from ...errors import KernelRegistrationError, KernelTypeError
from ...platforms import Platform
from ...types import LaunchDims, Outs, VmapMethod

__all__ = ["PallasKernel", "pallas_kernel"]

#: The most grid axes accepted (Pallas' own limit depends on the platform).
MAX_GRID_RANK = 6


def pallas_kernel(
    body: Callable[..., None],
    outs: Outs,
    *,
    grid: LaunchDims = (),
    in_specs: Any = None,
    out_specs: Any = None,
    interpret: bool | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
    vmap_method: VmapMethod | None = None,
    **compiler_params: Any,
) -> PallasKernel:
    """Wrap a Pallas kernel body as a JAX callable that builds its ``pallas_call``.

    Args:
        body: The Pallas kernel: takes one ref per input, then one per output, and
            writes the outputs (``o_ref[...] = ...``). Keywords given to the returned
            callable are bound to it as static values.
        outs: One ``jax.ShapeDtypeStruct``-like object (the callable returns one
            array) or a list/tuple of them (it returns a tuple).
        grid: The Pallas grid; ``()`` runs the body once on whole arrays.
        in_specs: ``pl.BlockSpec`` per input (``None``: whole arrays).
        out_specs: ``pl.BlockSpec`` per output, or one for a single output.
        interpret: ``None`` (default) interprets on ``'cpu'`` and compiles on
            ``'gpu'``/``'tpu'``; ``True`` always interprets (debugging on any
            platform); ``False`` never does.
        input_output_aliases: ``{input index: output index}`` for in-place updates.
        vmap_method: Checked by the rules of every wrapper; JAX batches a
            ``pallas_call`` itself, so every method gives the per-element result.
        **compiler_params: Fields of the lowering platform's Pallas
            ``CompilerParams`` (GPU/Triton: ``num_warps``, ``num_stages``; TPU:
            ``dimension_semantics``, ``vmem_limit_bytes``, ...).

    Returns:
        A callable ``f(*arrays, **static)``; the platform is the one an
        ``XLACustomKernel`` is lowering for, else that of JAX's default device.

    Raises:
        KernelTypeError: ``body`` is not callable or an ``outs`` entry has no
            ``.shape``/``.dtype``.
        KernelRegistrationError: ``outs`` is empty or a compiler parameter is not a
            field of any Pallas ``CompilerParams``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from polykernel import pallas_kernel
        >>> def double(x_ref, o_ref):
        ...     o_ref[...] = 2 * x_ref[...]
        >>> f = pallas_kernel(double, jax.ShapeDtypeStruct((3,), jnp.float32))
        >>> f(jnp.arange(3.0)).tolist()
        [0.0, 2.0, 4.0]
    """
    return PallasKernel(
        body,
        outs,
        grid=grid,
        in_specs=in_specs,
        out_specs=out_specs,
        interpret=interpret,
        input_output_aliases=input_output_aliases,
        compiler_params=compiler_params,
        vmap_method=vmap_method,
    )


def _fields(cls: Any) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)} if cls is not None else set()


def _check_compiler_params(name: str, params: Mapping[str, Any]) -> None:
    if not params:
        return  # nothing to check: do not import the platforms' Pallas modules
    known = _fields(jc.pallas_compiler_params_class("gpu"))
    known |= _fields(jc.pallas_compiler_params_class("tpu"))
    unknown = sorted(set(params) - known)
    if unknown:
        raise KernelRegistrationError(
            f"pallas_kernel '{name}': unknown compiler parameter(s) {unknown}; the "
            f"Pallas CompilerParams of this JAX take {sorted(known)}. Pass grid, "
            f"in_specs, out_specs, interpret, input_output_aliases and vmap_method "
            f"by name."
        )


class PallasKernel(BackendKernel):
    """The callable :func:`pallas_kernel` returns (one per body and ``outs``)."""

    backend = "pallas"

    def __init__(
        self,
        body: Callable[..., None],
        outs: Any,
        *,
        grid: LaunchDims,
        in_specs: Any,
        out_specs: Any,
        interpret: bool | None,
        input_output_aliases: Mapping[int, int] | None,
        compiler_params: dict[str, Any],
        vmap_method: VmapMethod | None = None,
    ) -> None:
        name = getattr(body, "__name__", type(body).__name__)
        if not callable(body):
            raise KernelTypeError(
                f"pallas_kernel: body must be a callable taking one ref per input "
                f"and output (got {type(body).__name__}: {body!r})."
            )
        if interpret not in (None, True, False):
            raise KernelTypeError(
                f"pallas_kernel '{name}': interpret must be None, True or False "
                f"(got {interpret!r})."
            )
        super().__init__(
            "pallas_kernel",
            name,
            outs,
            platforms=(Platform.CPU, Platform.GPU, Platform.TPU),
            input_output_aliases=input_output_aliases or None,
            vmap_method=vmap_method,
            # One ref per input and output, then static values bound to the body.
            parameters=Parameters.of_function(
                body, leading="buffers", dtype=STATIC, accept_var_keyword=True
            ),
        )
        _check_compiler_params(self.name, compiler_params)
        self.body = body
        self.grid = launch_shape(
            self.where, "grid", grid, max_rank=MAX_GRID_RANK, min_rank=0
        )
        self.in_block_specs = in_specs
        self.out_block_specs = out_specs
        self.interpret = interpret
        self.compiler_params = compiler_params

    def __repr__(self) -> str:
        return f"pallas_kernel({self.name!r}, outs={list(self.out_specs)})"

    def platform(self) -> str:
        """The platform the next call builds for (see :func:`pallas_kernel`)."""
        return lowering_platform() or self._built_for or current_platform()

    # -- the backend's half of the contract -------------------------------------------
    def launches_nothing(self, arrays: Sequence[Any], scalars: Scalars) -> bool:
        # Nothing to compute (Pallas itself fails on zero-size blocks).
        empty = any(0 in tuple(o.shape) for o in self.out_specs)
        return empty or size_of(self.grid) == 0

    def emit(
        self, platform: Platform, arrays: Sequence[Any], scalars: Scalars, outs: OutSpec
    ) -> list[Any]:
        result = self.build(platform, **dict(scalars))(*arrays)
        return [result] if outs.single else list(result)

    # -- the pallas_call --------------------------------------------------------------
    def build(self, platform: str, **static: Any) -> Callable[..., Any]:
        """The ``pallas_call`` for ``platform`` (``'cpu'``, ``'gpu'`` or ``'tpu'``).

        ``static`` keywords are bound to the body (``functools.partial``).
        """
        pl = jc.pallas_api()
        outs = self.outs
        assert outs is not None  # pallas_kernel always takes its outs
        body = functools.partial(self.body, **static) if static else self.body
        interpret = platform == Platform.CPU if self.interpret is None else (
            self.interpret
        )
        options: dict[str, Any] = {"grid": self.grid, "interpret": interpret}
        if self.in_block_specs is not None:
            options["in_specs"] = self.in_block_specs
        if self.out_block_specs is not None:
            out_specs = self.out_block_specs
            if not outs.single and isinstance(out_specs, tuple):
                out_specs = list(out_specs)  # the same tree as out_shape (a list)
            options["out_specs"] = out_specs
        if self.aliases:
            options["input_output_aliases"] = dict(self.aliases)
        params = self._compiler_params(platform)
        if params is not None and not interpret:
            options["compiler_params"] = params
        shapes = self.out_specs[0] if outs.single else list(self.out_specs)
        return pl.pallas_call(body, out_shape=shapes, name=self.name, **options)

    def _compiler_params(self, platform: str) -> Any:
        cls = jc.pallas_compiler_params_class(platform)
        if cls is None:
            return None
        # Always pass the platform's class on GPU: with none, JAX may pick Mosaic
        # GPU, which needs the CUDA plugin at lowering time; Triton lowers anywhere.
        fields = _fields(cls)
        return cls(**{k: v for k, v in self.compiler_params.items() if k in fields})
