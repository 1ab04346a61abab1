"""Transformation rules shared by every primitive: default vmap and per-input JVPs.

Both accept what the reference's operator code passes them: an ``XLACustomKernel``
or a plain JAX ``Primitive``, with single or multiple results.

* :func:`general_batching_rule` is the default ``vmap`` rule: it moves each batched
  operand's batch axis to the front and runs the primitive once per batch element under
  ``jax.lax.scan``; unbatched operands (``None`` axis) are passed whole to every step.
  A batch axis split over an explicit mesh stays split: each device loops over its
  own rows (inside a ``shard_map``). When nothing is batched it binds once and
  reports every output as unbatched.
* :func:`defjvp` is ``jax.interpreters.ad.defjvp`` generalised to multiple-result
  primitives: one rule per input, each returning that input's tangent contribution.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from .._jax_compat import (
    Primitive,
    Zero,
    aval_of,
    explicit_leading_axes,
    set_jvp_rule,
    zero_tangent,
)
from ..errors import KernelRegistrationError, KernelTypeError

__all__ = ["defjvp", "general_batching_rule"]


def _binder(prim: Any) -> Callable[..., Any]:
    """``prim.bind`` for a Primitive or an XLACustomKernel; ``prim`` if callable."""
    if isinstance(prim, Primitive):
        return prim.bind
    inner = getattr(prim, "primitive", None)
    if isinstance(inner, Primitive):
        return inner.bind
    if callable(prim):
        return prim
    raise KernelTypeError(
        f"general_batching_rule: prim must be a JAX Primitive, an XLACustomKernel or "
        f"a callable (got {type(prim).__name__}: {prim!r})."
    )


def general_batching_rule(
    prim: Any, args: Sequence[Any], axes: Sequence[int | None], **kwargs: Any
) -> tuple[Any, Any]:
    """Batch ``prim`` by looping over the batch with ``jax.lax.scan``.

    Correct for any kernel and any mix of batched / unbatched operands and batch axes;
    a hand-written rule (``def_batching_rule``) can be faster.

    Args:
        prim: The primitive: a JAX ``Primitive``, an ``XLACustomKernel`` (its
            primitive is bound) or any callable taking ``(*args, **kwargs)``.
        args: Operands; batched ones carry their batch axis at ``axes[i]``.
        axes: Batch axis per operand, ``None`` for unbatched operands.
        **kwargs: The primitive's parameters, passed through unchanged.

    Returns:
        ``(outs, out_dims)``: ``out_dims`` has the structure of ``outs`` (a list for
        a multiple-result primitive, one value for a single-result one), every leaf
        ``0``, or ``None`` when no operand was batched.

    Example:
        >>> import functools, jax, jax.numpy as jnp, polykernel as pk
        >>> op = pk.XLACustomKernel("doc.batching")
        >>> op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: 2 * x)
        >>> op.def_batching_rule(functools.partial(pk.general_batching_rule, op))
        >>> spec = jax.ShapeDtypeStruct((2,), jnp.float32)
        >>> jax.vmap(lambda x: op(x, outs=spec))(jnp.ones((3, 2))).shape
        (3, 2)
    """
    bind = _binder(prim)
    if len(args) != len(axes):
        raise KernelRegistrationError(
            f"general_batching_rule: got {len(args)} operand(s) but {len(axes)} batch "
            f"axes; pass one axis (or None) per operand."
        )
    batched = [i for i, ax in enumerate(axes) if ax is not None]
    axis_of: dict[int, int] = {}
    for i in batched:
        ndim, ax = jnp.ndim(args[i]), axes[i]
        if not isinstance(ax, int) or not -ndim <= ax < max(ndim, 1):
            raise KernelRegistrationError(
                f"general_batching_rule: operand {i} has rank {ndim}, so its batch "
                f"axis must be an int in [{-ndim}, {ndim}) or None (got "
                f"{axes[i]!r})."
            )
        axis_of[i] = ax
    batched_sizes = {jnp.shape(args[i])[axis_of[i]] for i in batched}
    if len(batched_sizes) > 1:
        raise KernelRegistrationError(
            f"general_batching_rule: batched operands disagree on the batch size "
            f"({sorted(batched_sizes)}); every mapped axis must have the same length."
        )
    if not batched:
        outs = bind(*args, **kwargs)
        return outs, jax.tree.map(lambda _: None, outs)
    moved = list(args)
    for i in batched:
        if axis_of[i] != 0:
            moved[i] = jnp.moveaxis(args[i], axis_of[i], 0)

    outs = _loop(bind, moved, batched, kwargs)
    return outs, jax.tree.map(lambda _: 0, outs)


def _scan(
    bind: Callable[..., Any], operands: list[Any], batched: list[int], kwargs: Any
) -> Any:
    """One bind per element of the (leading) batch axis, under ``lax.scan``."""

    def step(carry: None, slices: list[Any]) -> tuple[None, Any]:
        args = list(operands)
        for i, piece in zip(batched, slices, strict=True):
            args[i] = piece
        return carry, bind(*args, **kwargs)

    return jax.lax.scan(step, None, [operands[i] for i in batched])[1]


def _loop(
    bind: Callable[..., Any], moved: list[Any], batched: list[int], kwargs: Any
) -> Any:
    """The batch loop, keeping a batch axis that is split over an explicit mesh.

    ``lax.scan`` refuses an explicitly sharded leading axis (its slices would not
    be replicated). Such a batch stays split: a ``shard_map`` over the mesh axes
    that split it runs the scan on each device's own rows (unbatched operands are
    whole on each of those devices).
    """
    found = next(
        (a for a in map(explicit_leading_axes, (moved[i] for i in batched)) if a),
        None,
    )
    if found is None:
        return _scan(bind, moved, batched, kwargs)
    mesh, names = found  # JAX types only even splits: each device has whole rows
    split = jax.sharding.PartitionSpec(names)
    specs = tuple(
        split if i in batched else jax.sharding.PartitionSpec()
        for i in range(len(moved))
    )
    return jax.shard_map(
        lambda *ops: _scan(bind, list(ops), batched, kwargs),
        mesh=mesh,
        in_specs=specs,
        out_specs=split,
        axis_names=set(names),
        check_vma=False,
    )(*moved)


def defjvp(primitive: Any, *jvp_rules: Callable[..., Any] | None) -> None:
    """Define a JVP from one tangent rule per input of a primitive.

    Each rule is called as ``rule(tangent, *primals, **params)`` and returns the
    tangent contribution of that input: for a multiple-result primitive a list with
    one entry per output (``None`` for "no contribution"; a bare array is accepted
    when there is a single output), for a single-result primitive one array.
    ``None`` in place of a rule means the input never contributes. Contributions
    from several inputs are summed. The rule count must equal the input count; a
    mismatch is reported when the JVP first runs.

    Args:
        primitive: A JAX ``Primitive`` or an ``XLACustomKernel``.
        *jvp_rules: One rule (or ``None``) per primitive input.

    Raises:
        KernelTypeError: ``primitive`` is neither, or a rule is not callable.

    Example:
        >>> import polykernel as pk
        >>> op = pk.XLACustomKernel("doc.defjvp_example")
        >>> pk.defjvp(op, lambda t, x, **kw: [2 * t])
    """
    prim = getattr(primitive, "primitive", primitive)
    if not isinstance(prim, Primitive):
        raise KernelTypeError(
            f"defjvp: expected a JAX Primitive or an XLACustomKernel, got "
            f"{type(primitive).__name__}: {primitive!r}."
        )
    for index, rule in enumerate(jvp_rules):
        if rule is not None and not callable(rule):
            raise KernelTypeError(
                f"defjvp for '{prim.name}': rule {index} must be callable or None "
                f"(got {type(rule).__name__}: {rule!r})."
            )
    set_jvp_rule(prim, functools.partial(_jvp, prim, tuple(jvp_rules)))


def _jvp(
    prim: Primitive,
    rules: tuple[Callable[..., Any] | None, ...],
    primals: Sequence[Any],
    tangents: Sequence[Any],
    **params: Any,
) -> tuple[Any, Any]:
    if len(rules) != len(primals):
        raise KernelRegistrationError(
            f"JVP of '{prim.name}': {len(rules)} JVP rule(s) were given but the "
            f"primitive was called with {len(primals)} input(s). Pass exactly one rule "
            f"(or None) per input to def_jvp_rule2 / defjvp."
        )
    primals_out = prim.bind(*primals, **params)
    multiple = prim.multiple_results
    outs = list(primals_out) if multiple else [primals_out]
    totals: list[Any] = [None] * len(outs)
    for index, (rule, tangent) in enumerate(zip(rules, tangents, strict=True)):
        if rule is None or type(tangent) is Zero:
            continue
        contribution = _as_contributions(
            prim, index, rule(tangent, *primals, **params), len(outs), multiple
        )
        for k, piece in enumerate(contribution):
            if piece is None or type(piece) is Zero:
                continue
            totals[k] = piece if totals[k] is None else totals[k] + piece
    # Output avals come from the bound outputs, so a plain Primitive (whose params
    # have no `outs`) works exactly like an XLACustomKernel.
    tangents_out = [
        zero_tangent(aval_of(out)) if total is None else total
        for total, out in zip(totals, outs, strict=True)
    ]
    return primals_out, (tangents_out if multiple else tangents_out[0])


def _as_contributions(
    prim: Primitive, index: int, result: Any, n_outs: int, multiple: bool
) -> Sequence[Any]:
    if not multiple:
        return [result]
    if not isinstance(result, (list, tuple)):
        if n_outs != 1:
            raise KernelTypeError(
                f"JVP of '{prim.name}': the rule for input {index} returned "
                f"{type(result).__name__}, expected a list of {n_outs} tangents (one "
                f"per output; use None for outputs it does not affect)."
            )
        return [result]
    if len(result) != n_outs:
        raise KernelRegistrationError(
            f"JVP of '{prim.name}': the rule for input {index} returned "
            f"{len(result)} tangent(s), expected {n_outs} (one per "
            f"output; use None for outputs it does not affect)."
        )
    return result
