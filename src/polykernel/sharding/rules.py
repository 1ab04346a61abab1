"""How one primitive call is split across the devices of a mesh.

Without a rule, a primitive is one opaque custom call to XLA's partitioner: under
``jit`` with sharded inputs XLA all-gathers them and every device runs the whole call.
With a rule (``def_batch_partitioning`` or ``def_sharding_rule`` on the primitive) the
call is lowered, when a program is partitioned over several devices, as a JAX
``custom_partitioning`` call carrying a Shardy sharding rule. At compile time the
partitioner asks for the per-shard program; it binds the primitive on the local
blocks with per-shard ``outs`` (or runs the user's partition function). On one device
and inside a fully manual ``shard_map`` the primitive lowers as before.

Rule strings use a subset of Shardy's einsum-like notation: operands separated by
commas, one factor name per dimension separated by spaces, ``->``, then the outputs,
e.g. ``"i j, j -> i"``. A factor shared by inputs and outputs is partitioned the same
way everywhere; a factor in ``need_replication`` is never partitioned. See
``docs/sharding.md``.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from .. import _jax_compat as jc
from ..errors import KernelRegistrationError, KernelTypeError
from .plan import ShardPlan, run_partition

__all__ = [
    "ShardingRule",
    "batch_partitioning",
    "batch_rule",
    "get_rule",
    "parse_rule",
    "partitioned",
    "plan_for",
    "set_rule",
    "sharding_rule",
]

Factors = tuple[tuple[str, ...], ...]
#: A rule string, or ``rule(ins, outs, **params)`` giving one (or the string and
#: more need-replication factors, as :func:`batch_rule`'s rules do).
Rule = str | Callable[..., str | tuple[str, tuple[str, ...]]]
_FACTOR = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_RULES: weakref.WeakKeyDictionary[Any, ShardingRule] = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class ShardingRule:
    """A primitive's declared partitioning.

    Attributes:
        owner: The primitive's name (for messages).
        rule: A rule string, or ``rule(ins, outs, **params) -> str`` for rules that
            depend on ranks or parameters.
        partition: ``partition(shard, *blocks, outs, **params)`` computing one
            shard's outputs, or ``None``: bind the primitive on the blocks.
        need_replication: Factors that are never partitioned.
    """

    owner: str
    rule: Rule
    partition: Callable[..., Any] | None = None
    need_replication: tuple[str, ...] = ()

    def resolve(
        self, in_ranks: Sequence[int], outs: Sequence[Any], ins: Any, params: dict
    ) -> tuple[str, Factors, Factors, tuple[str, ...]]:
        """The rule string, factors and need-replication factors for one call."""
        text, need = self.rule, self.need_replication
        if callable(text):
            text = text(ins, tuple(outs), **params)
            if isinstance(text, tuple) and len(text) == 2:
                text, extra = text
                need = (*need, *extra)
        in_f, out_f = parse_rule(self.owner, text)
        out_ranks = [len(o.shape) for o in outs]
        for kind, factors, ranks in (
            ("input", in_f, in_ranks),
            ("output", out_f, out_ranks),
        ):
            _check_ranks(self.owner, text, kind, factors, ranks)
        shapes = [tuple(getattr(a, "shape", ())) for a in ins] or [()] * len(in_f)
        _check_sizes(self.owner, text, in_f, out_f, shapes, [o.shape for o in outs])
        present = {n for g in (*in_f, *out_f) for n in g}
        return text, in_f, out_f, tuple(f for f in need if f in present)


def _check_ranks(
    owner: str, text: str, kind: str, factors: Factors, ranks: Sequence[int]
) -> None:
    if len(factors) != len(ranks):
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}': sharding rule {text!r} names "
            f"{len(factors)} {kind}(s), the call has {len(ranks)}. Write one "
            f"comma-separated group of factors per {kind}."
        )
    for i, (names, rank) in enumerate(zip(factors, ranks, strict=True)):
        if len(names) != rank:
            raise KernelRegistrationError(
                f"XLACustomKernel '{owner}': sharding rule {text!r} gives {kind} {i} "
                f"{len(names)} factor(s) but it has rank {rank}. Write one factor "
                f"name per dimension."
            )


def _check_sizes(
    owner: str, text: str, in_f: Factors, out_f: Factors, in_shapes, out_shapes
) -> None:
    """Refuse a factor with two sizes: it would split operands that do not align."""
    seen: dict[str, tuple[int, str]] = {}
    operands = [("input", i, f, s) for i, (f, s) in enumerate(zip(in_f, in_shapes,
                                                                   strict=True))]
    operands += [("output", i, f, s) for i, (f, s) in enumerate(zip(out_f, out_shapes,
                                                                     strict=True))]
    for kind, i, names, shape in operands:
        for dim, (name, size) in enumerate(zip(names, shape, strict=True)):
            where = f"{kind} {i} dimension {dim}"
            first = seen.setdefault(name, (int(size), where))
            if first[0] != int(size):
                raise KernelRegistrationError(
                    f"XLACustomKernel '{owner}': sharding rule {text!r} gives factor "
                    f"'{name}' size {first[0]} ({first[1]}) and size {size} "
                    f"({where}); a factor names dimensions of one size. Give these "
                    f"dimensions different factor names."
                )


def parse_rule(owner: str, text: Any) -> tuple[Factors, Factors]:
    """Split ``"i j, j -> i"`` into factor names per input and per output.

    Raises:
        KernelRegistrationError: the text is not a rule in the supported notation.
    """
    if not isinstance(text, str):
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}': a sharding rule must be a string such as "
            f"'i j, j -> i' (got {type(text).__name__}: {text!r})."
        )
    if text.count("->") != 1:
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}': sharding rule {text!r} must contain exactly "
            f"one '->' between the inputs and the outputs, e.g. 'i, i -> i'."
        )
    sides = []
    for side in text.split("->"):
        groups = tuple(tuple(g.split()) for g in side.split(","))
        for group in groups:
            twice = sorted({n for n in group if group.count(n) > 1})
            if twice:
                raise KernelRegistrationError(
                    f"XLACustomKernel '{owner}': sharding rule {text!r} names factor "
                    f"'{twice[0]}' twice in one operand ({' '.join(group)!r}); a "
                    f"factor names one dimension of an operand. Give each dimension "
                    f"its own factor."
                )
        for name in (n for g in groups for n in g):
            if not _FACTOR.match(name):
                raise KernelRegistrationError(
                    f"XLACustomKernel '{owner}': sharding rule {text!r} has factor "
                    f"{name!r}; a factor is a letter followed by letters, digits or "
                    f"'_' (compound factors and '...' are not supported: use a "
                    f"callable rule that writes one factor per dimension)."
                )
        sides.append(groups)
    return sides[0], sides[1]


def batch_partitioning(owner: str, n_axes: Any, replicated_inputs: Any) -> ShardingRule:
    """The rule of ``def_batch_partitioning``, with its arguments checked."""
    if isinstance(n_axes, bool) or not isinstance(n_axes, int) or n_axes < 1:
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}'.def_batch_partitioning(): n_axes must be an "
            f"int >= 1 (got {n_axes!r})."
        )
    if isinstance(replicated_inputs, str | bytes) or not hasattr(
        replicated_inputs, "__iter__"
    ):
        raise KernelTypeError(
            f"XLACustomKernel '{owner}'.def_batch_partitioning(): replicated_inputs "
            f"must be a sequence of input indices, e.g. (1, 2) or () (got "
            f"{type(replicated_inputs).__name__}: {replicated_inputs!r})."
        )
    replicated = tuple(replicated_inputs)
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0
               for i in replicated):  # fmt: skip
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}'.def_batch_partitioning(): replicated_inputs "
            f"must be input indices >= 0 (got {replicated_inputs!r})."
        )
    return ShardingRule(owner, batch_rule(n_axes, replicated), None, ())


def sharding_rule(
    owner: str, rule: Rule, partition: Any, need_replication: Any
) -> ShardingRule:
    """The rule of ``def_sharding_rule``, with its arguments checked."""
    if not callable(rule):
        parse_rule(owner, rule)
    if partition is not None and not callable(partition):
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}'.def_sharding_rule(): partition must be "
            f"callable or None (got {type(partition).__name__})."
        )
    names = (
        (need_replication,) if isinstance(need_replication, str) else need_replication
    )
    names = tuple(names)
    bad = [n for n in names if not isinstance(n, str) or not _FACTOR.match(n)]
    if bad:
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}'.def_sharding_rule(): need_replication must "
            f"be factor names from the rule (got {bad!r})."
        )
    return ShardingRule(owner, rule, partition, names)


def batch_rule(
    n_axes: int, replicated_inputs: Sequence[int]
) -> Callable[..., tuple[str, tuple[str, ...]]]:
    """A rule sharing the leading ``n_axes`` of every output and non-replicated input.

    Trailing dimensions (and replicated inputs) get factors of their own that need
    replication, so a kernel always sees them whole and a block of the leading ones.
    """
    replicated = frozenset(replicated_inputs)
    lead = [f"b{d}" for d in range(n_axes)]

    def groups(shapes: Any, tag: str, skip: frozenset) -> tuple[list[str], list[str]]:
        texts, own = [], []
        for i, x in enumerate(shapes):
            rank = len(x.shape)
            head = [] if i in skip else lead[: min(rank, n_axes)]
            tail = [f"{tag}{i}_{d}" for d in range(len(head), rank)]
            texts.append(" ".join(head + tail))
            own += tail
        return texts, own

    def rule(ins: Any, outs: Any, **params: Any) -> tuple[str, tuple[str, ...]]:
        in_texts, in_own = groups(ins, "in", replicated)
        out_texts, out_own = groups(outs, "out", frozenset())
        text = ", ".join(in_texts) + " -> " + ", ".join(out_texts)
        return text, (*in_own, *out_own)

    return rule


def set_rule(primitive: Any, rule: ShardingRule) -> None:
    """Attach ``rule`` to ``primitive`` (replacing any earlier one)."""
    jc.require_devices_during_lowering(primitive)
    _RULES[primitive] = rule


def get_rule(primitive: Any) -> ShardingRule | None:
    """The rule attached to ``primitive``, or ``None``."""
    return _RULES.get(primitive)


def plan_for(
    ctx: Any, outs: tuple[Any, ...], backend: str, params: dict[str, Any]
) -> ShardPlan | None:
    """How to partition this lowering of a call, or ``None`` to lower it whole.

    Raises:
        KernelRegistrationError: the primitive's rule does not fit the call.
    """
    rule = get_rule(ctx.primitive)
    if rule is None or not jc.shardy_enabled() or jc.lowering_mesh(ctx) is None:
        return None
    in_ranks = [len(a.shape) for a in ctx.avals_in]
    text, in_f, out_f, need = rule.resolve(in_ranks, outs, tuple(ctx.avals_in), params)
    return ShardPlan(
        primitive=ctx.primitive,
        owner=rule.owner,
        partition=rule.partition,
        text=text,
        in_factors=in_f,
        out_factors=out_f,
        need_replication=need,
        outs=tuple(outs),
        backend=backend,
        params=dict(params),
    )


def partitioned(
    ctx: Any, plan: ShardPlan, body: Callable[..., Any]
) -> Callable[..., Any]:
    """Wrap ``body`` (the whole call) as a ``custom_partitioning`` call lowered by
    ``ctx``.

    ``body`` stays the program XLA runs when it does not partition the call. The
    module is given a key of its own (:func:`_key_this_lowering`).
    """
    _key_this_lowering(ctx)

    def partition(mesh: Any, arg_shapes: Any, result_shape: Any) -> Any:
        return run_partition(plan, mesh, arg_shapes, result_shape)

    def wrapped(*xs: Any) -> Any:
        cp = jc.custom_partitioning(body)
        cp.def_partition(
            partition=partition,
            sharding_rule=plan.text,
            need_replication_factors=plan.need_replication,
        )
        return cp(*xs)

    return wrapped


def _key_this_lowering(ctx: Any) -> None:
    """Make JAX's persistent compilation cache key of this module its own.

    JAX keys a ``custom_partitioning`` call by the address (``id``) of its callback
    object, and the partitioned program is compiled into the cached executable: an
    address reused for another partition (a later lowering in this process, after
    the first one's object was freed; a forked process) would load a program
    partitioned by another function — silently wrong results. Which Python code a
    partition runs cannot be keyed soundly, so a module holding one of our
    partitioned calls gets a random key of its own (``uuid4``: the OS's randomness,
    so a forked child does not repeat its parent's). Nothing correct is lost: under
    JAX's own key such programs only hit by a coincidence of addresses.
    """
    jc.mark_module(ctx, "polykernel.partitioned_lowering", uuid.uuid4().hex)
