"""The per-shard program of a partitioned primitive call (see :mod:`.sharding`).

XLA's partitioner calls :func:`run_partition` while it compiles a program. It gets
the mesh and the shardings Shardy propagated, decides which shardings the call
accepts, and returns a function of the local blocks: the primitive bound with
per-shard ``outs``, or the user's partition function given a :class:`ShardContext`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from ..errors import KernelRegistrationError, KernelTypeError

__all__ = ["ShardContext", "ShardPlan", "run_partition"]

Axes = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """One lowered call of a primitive with a sharding rule.

    Attributes:
        primitive: The JAX primitive to bind per shard.
        owner: The primitive's name (for messages).
        partition: The user's partition function, or ``None``.
        text: The Shardy rule string of this call.
        in_factors, out_factors: Factor names per dimension of each input / output.
        need_replication: Factors that are never split.
        outs: The call's ``outs`` (whole arrays).
        backend: The backend the call lowers to.
        params: The call's other parameters.
    """

    primitive: Any
    owner: str
    partition: Any
    text: str
    in_factors: tuple[tuple[str, ...], ...]
    out_factors: tuple[tuple[str, ...], ...]
    need_replication: tuple[str, ...]
    outs: tuple[Any, ...]
    backend: str
    params: dict[str, Any]


def _dims(spec: Any, ndim: int) -> list[Axes]:
    """Mesh axes of each dimension of a ``PartitionSpec`` (``()`` = whole)."""
    entries = list(spec) + [None] * (ndim - len(spec))
    out = []
    for entry in entries[:ndim]:
        if entry is None:
            out.append(())
        elif isinstance(entry, str):
            out.append((entry,))
        else:
            out.append(tuple(entry))
    return out


def _spec(dims: Sequence[Axes]) -> PartitionSpec:
    return PartitionSpec(*[None if not a else a[0] if len(a) == 1 else a for a in dims])


def _local_shape(shape: Sequence[int], dims: Sequence[Axes], mesh: Any) -> tuple:
    # XLA pads an uneven split: every shard holds ceil(n / shards) elements.
    return tuple(
        -(-int(n) // math.prod(mesh.shape[a] for a in axes))
        for n, axes in zip(shape, dims, strict=True)
    )


def _accepted_dims(
    plan: ShardPlan, mesh: Any, arg_shapes: Sequence[Any], result_shapes: Sequence[Any]
) -> tuple[list[list[Axes]], list[list[Axes]]]:
    """Shardings the call accepts; XLA reshards operands and results to match.

    A factor takes the axes of its first sharded occurrence in the outputs (or, with
    a partition function, also the inputs), so every dimension of one factor is split
    the same way. Factors that must be replicated get no axes. Without a partition
    function the default per-shard call only sees blocks, so a factor is split only
    where that is exact: it must occur in an input *and* an output. An input-only
    factor would need a reduction across shards, and an output-only factor its
    block's offset, which only a partition function can write (``shard.in_offset``,
    ``shard.out_offset``); both stay whole.
    """
    in_f, out_f = plan.in_factors, plan.out_factors
    need = set(plan.need_replication)
    if plan.partition is None:
        in_names = {n for names in in_f for n in names}
        out_names = {n for names in out_f for n in names}
        need |= in_names ^ out_names  # in only one side: never split by default

    def specs(shapes: Sequence[Any]) -> list[list[Axes]]:
        return [_dims(_spec_of(s.sharding), len(s.shape)) for s in shapes]

    got_in, got_out = specs(arg_shapes), specs(result_shapes)
    chosen: dict[str, Axes] = {}
    sources = [(out_f, got_out)]
    if plan.partition is not None:
        sources.append((in_f, got_in))
    used: set[str] = set()
    for factors, dims in sources:
        for names, axes_list in zip(factors, dims, strict=True):
            for name, axes in zip(names, axes_list, strict=True):
                free = not (set(axes) & used)
                if name not in chosen and name not in need and axes and free:
                    chosen[name] = axes
                    used.update(axes)
    ins = [[chosen.get(n, ()) for n in names] for names in in_f]
    outs = [[chosen.get(n, ()) for n in names] for names in out_f]
    return ins, outs


def _spec_of(sharding: Any) -> PartitionSpec:
    spec = getattr(sharding, "spec", None)
    return spec if spec is not None else PartitionSpec()


class ShardContext:
    """What a partition function knows about the shard it computes.

    Attributes:
        mesh: The ``jax.sharding.Mesh`` the program is partitioned over.
        in_specs: ``PartitionSpec`` of each input block the function receives.
        out_specs: ``PartitionSpec`` of each output block it must return.
        outs: Per-shard ``jax.ShapeDtypeStruct`` of each output.
        global_outs: The call's ``outs`` (whole arrays).
        backend: The backend the call lowers to.
    """

    def __init__(
        self, plan: ShardPlan, mesh: Any, in_dims, out_dims, local_outs, in_sizes=()
    ) -> None:
        self._plan = plan
        self._in_dims, self._out_dims = in_dims, out_dims
        self._in_sizes = tuple(in_sizes)
        self.mesh = mesh
        self.in_specs = tuple(_spec(d) for d in in_dims)
        self.out_specs = tuple(_spec(d) for d in out_dims)
        self.outs = tuple(local_outs)
        self.global_outs = tuple(plan.outs)
        self.backend = plan.backend

    def in_axes(self, index: int, dim: int = 0) -> Axes:
        """Mesh axes splitting dimension ``dim`` of input ``index`` (``()`` = whole)."""
        return self._in_dims[index][dim]

    def out_axes(self, index: int, dim: int = 0) -> Axes:
        """Mesh axes splitting dimension ``dim`` of output ``index``."""
        return self._out_dims[index][dim]

    def in_offset(self, index: int, dim: int = 0) -> Any:
        """Where this shard's block of input ``index`` starts along ``dim``: its
        global index of the block's first element (a traced int32; 0 when whole)."""
        return self.index(self.in_axes(index, dim)) * self._in_sizes[index][dim]

    def out_offset(self, index: int, dim: int = 0) -> Any:
        """Where this shard's block of output ``index`` starts along ``dim`` (its
        global index), e.g. for a factor only the outputs carry."""
        return self.index(self.out_axes(index, dim)) * self.outs[index].shape[dim]

    def count(self, axes: Axes | str) -> int:
        """How many blocks ``axes`` split a dimension into (1 for ``()``); one mesh
        axis may be named by its string."""
        return math.prod(self.mesh.shape[a] for a in self._axes("count", axes))

    def index(self, axes: Axes | str) -> Any:
        """This shard's block number along ``axes`` (a traced int32; 0 for ``()``)."""
        names = self._axes("index", axes)
        if not names:
            return np.int32(0)
        return jax.lax.axis_index(names[0] if len(names) == 1 else names)

    def _axes(self, method: str, axes: Any) -> tuple[str, ...]:
        names = (axes,) if isinstance(axes, str) else axes
        known = tuple(self.mesh.axis_names)
        if not isinstance(names, Sequence) or any(n not in known for n in names):
            raise KernelTypeError(
                f"XLACustomKernel '{self._plan.owner}': shard.{method}() takes mesh "
                f"axis names, a tuple of them (e.g. shard.in_axes(0)) or one name, "
                f"from {list(known)} (got {type(axes).__name__}: {axes!r})."
            )
        return tuple(names)

    def call(self, *blocks: Any, outs: Any = None, **params: Any) -> list[Any]:
        """Bind the primitive on ``blocks`` (default ``outs``: this shard's ``outs``).

        ``params`` replace the call's parameters of the same name.
        """
        plan = self._plan
        leaves = self.outs if outs is None else jax.tree.leaves(outs, is_leaf=_is_sds)
        structs = tuple(
            jax.ShapeDtypeStruct(o.shape, np.dtype(o.dtype)) for o in leaves
        )
        merged = {**plan.params, **params}
        return plan.primitive.bind(
            *blocks, outs=structs, backend=plan.backend, **merged
        )


def _is_sds(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def run_partition(
    plan: ShardPlan, mesh: Any, arg_shapes: Any, result_shape: Any
) -> Any:
    """``custom_partitioning``'s partition callback for one lowered call."""
    arg_shapes, result_shapes = list(arg_shapes), list(result_shape)
    in_dims, out_dims = _accepted_dims(plan, mesh, arg_shapes, result_shapes)
    local_outs = [
        jax.ShapeDtypeStruct(_local_shape(o.shape, d, mesh), np.dtype(o.dtype))
        for o, d in zip(plan.outs, out_dims, strict=True)
    ]
    in_sizes = [
        _local_shape(a.shape, d, mesh) for a, d in zip(arg_shapes, in_dims, strict=True)
    ]
    shard = ShardContext(plan, mesh, in_dims, out_dims, local_outs, in_sizes)
    user = plan.partition

    def lower_fn(*blocks: Any) -> list[Any]:
        if user is None:
            return list(shard.call(*blocks))
        result = user(shard, *blocks, outs=shard.outs, **plan.params)
        result = list(result) if isinstance(result, (list, tuple)) else [result]
        _check_result(plan.owner, result, local_outs)
        return result

    result_shardings = [NamedSharding(mesh, _spec(d)) for d in out_dims]
    arg_shardings = tuple(NamedSharding(mesh, _spec(d)) for d in in_dims)
    return mesh, lower_fn, result_shardings, arg_shardings


def _check_result(owner: str, result: list[Any], local_outs: list[Any]) -> None:
    for k, r in enumerate(result):
        if not _is_sds(r):
            raise KernelTypeError(
                f"XLACustomKernel '{owner}': the partition function returned "
                f"{type(r).__name__} ({r!r:.60}) as block {k}, expected an array "
                f"shaped like shard.outs[{k}]. Return one array per output (a list "
                f"for several), shaped like shard.outs."
            )
    got = [(tuple(r.shape), np.dtype(r.dtype)) for r in result]
    want = [(tuple(o.shape), np.dtype(o.dtype)) for o in local_outs]
    if got != want:
        raise KernelRegistrationError(
            f"XLACustomKernel '{owner}': the partition function returned blocks "
            f"{got}, expected this shard's outputs {want} (shard.outs). Return one "
            f"block per output, shaped like shard.outs."
        )
