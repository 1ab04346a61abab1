"""Partitioning rules of primitives (see ``docs/sharding.md``).

- :mod:`.rules`: ``def_batch_partitioning`` / ``def_sharding_rule``, parsed and
  attached to a primitive; the ``custom_partitioning`` wrapper of a lowering;
- :mod:`.plan`: the per-shard program XLA's partitioner asks for, and the
  :class:`~.plan.ShardContext` a partition function receives.
"""

from __future__ import annotations

from .plan import ShardContext, ShardPlan
from .rules import (
    ShardingRule,
    batch_partitioning,
    batch_rule,
    get_rule,
    parse_rule,
    set_rule,
    sharding_rule,
)

__all__ = [
    "ShardContext",
    "ShardPlan",
    "ShardingRule",
    "batch_partitioning",
    "batch_rule",
    "get_rule",
    "parse_rule",
    "set_rule",
    "sharding_rule",
]
