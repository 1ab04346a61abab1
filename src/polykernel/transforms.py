"""Transformation rules shared by every primitive: default vmap and per-input JVPs.

* :func:`general_batching_rule` is the default ``vmap`` rule: it moves each batched
  operand's batch axis to the front and runs the primitive once per batch element under
  ``jax.lax.scan``; unbatched operands (``None`` axis) are passed whole to every step.
* :func:`defjvp` is ``jax.interpreters.ad.defjvp`` for multiple-result primitives: one
  rule per input, each returning that input's tangent contribution to every output.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from ._jax_compat import Primitive, ShapedArray, Zero, set_jvp_rule, zero_tangent
from .errors import KernelRegistrationError

__all__ = ["defjvp", "general_batching_rule"]


def general_batching_rule(
    prim: Primitive, args: Sequence[Any], axes: Sequence[int | None], **kwargs: Any
) -> tuple[Sequence[Any], Sequence[int | None]]:
    """Batch ``prim`` by looping over the batch with ``jax.lax.scan``.

    Correct for any kernel and any mix of batched / unbatched operands and batch axes;
    a hand-written rule (``def_batching_rule``) can be faster.

    Args:
        prim: The primitive being batched.
        args: Operands; batched ones carry their batch axis at ``axes[i]``.
        axes: Batch axis per operand, ``None`` for unbatched operands.
        **kwargs: The primitive's parameters, passed through unchanged.

    Returns:
        The batched outputs and their batch axes (always 0).

    Example:
        >>> import polykernel as pk
        >>> callable(pk.general_batching_rule)
        True
    """
    batched = [i for i, ax in enumerate(axes) if ax is not None]
    if not batched:
        outs = prim.bind(*args, **kwargs)
        return outs, [None] * len(outs)
    moved = list(args)
    for i in batched:
        moved[i] = jnp.moveaxis(args[i], axes[i], 0)

    def step(carry: None, slices: list[Any]) -> tuple[None, Any]:
        operands = list(moved)
        for i, piece in zip(batched, slices, strict=True):
            operands[i] = piece
        return carry, prim.bind(*operands, **kwargs)

    _, outs = jax.lax.scan(step, None, [moved[i] for i in batched])
    return outs, [0] * len(outs)


def defjvp(primitive: Any, *jvp_rules: Callable[..., Any] | None) -> None:
    """Define a JVP from one tangent rule per input of a multiple-result primitive.

    Each rule is called as ``rule(tangent, *primals, **params)`` and returns the
    tangent contribution of that input to every output: a list with one entry per
    output (``None`` for "no contribution"), or a bare array when there is a single
    output. ``None`` in place of a rule means the input never contributes. Contributions
    from several inputs are summed.

    Args:
        primitive: A JAX ``Primitive`` or an ``XLACustomKernel``.
        *jvp_rules: One rule (or ``None``) per primitive input.

    Example:
        >>> import polykernel as pk
        >>> op = pk.XLACustomKernel("doc.defjvp_example")
        >>> pk.defjvp(op, lambda t, x, **kw: [2 * t])
    """
    prim = getattr(primitive, "primitive", primitive)
    set_jvp_rule(prim, functools.partial(_jvp, prim, tuple(jvp_rules)))


def _jvp(
    prim: Primitive,
    rules: tuple[Callable[..., Any] | None, ...],
    primals: Sequence[Any],
    tangents: Sequence[Any],
    **params: Any,
) -> tuple[Any, list[Any]]:
    if len(rules) != len(primals):
        raise KernelRegistrationError(
            f"JVP of '{prim.name}': {len(rules)} JVP rule(s) were given but the "
            f"primitive was called with {len(primals)} input(s). Pass exactly one rule "
            f"(or None) per input to def_jvp_rule2 / defjvp."
        )
    primals_out = prim.bind(*primals, **params)
    out_avals = [ShapedArray(o.shape, o.dtype) for o in params["outs"]]
    totals: list[Any] = [None] * len(primals_out)
    for index, (rule, tangent) in enumerate(zip(rules, tangents, strict=True)):
        if rule is None or type(tangent) is Zero:
            continue
        contribution = rule(tangent, *primals, **params)
        if not isinstance(contribution, (list, tuple)):
            contribution = [contribution]
        if len(contribution) != len(primals_out):
            raise KernelRegistrationError(
                f"JVP of '{prim.name}': the rule for input {index} returned "
                f"{len(contribution)} tangent(s), expected {len(primals_out)} (one per "
                f"output; use None for outputs it does not affect)."
            )
        for k, piece in enumerate(contribution):
            if piece is None or type(piece) is Zero:
                continue
            totals[k] = piece if totals[k] is None else totals[k] + piece
    tangents_out = [
        zero_tangent(aval) if total is None else total
        for total, aval in zip(totals, out_avals, strict=True)
    ]
    return primals_out, tangents_out
