"""Deprecated: ``polykernel.shard_plan`` moved to :mod:`polykernel.sharding.plan`.

It still offers the names it had (``ShardContext``, the type of a partition
function's ``shard`` argument, ``ShardPlan``, ``run_partition``), with one
:class:`~polykernel.errors.PolykernelDeprecationWarning` when imported; it will be
removed in polykernel 0.2 (see the CHANGELOG). Importing ``polykernel`` does not
import it.
"""

from __future__ import annotations

import warnings

from .sharding.plan import ShardContext, ShardPlan, run_partition
from .warning_types import PolykernelDeprecationWarning

__all__ = ["ShardContext", "ShardPlan", "run_partition"]

# stacklevel=2 names the importing line: warnings skips importlib's own frames.
warnings.warn(
    "polykernel.shard_plan is deprecated: import polykernel.sharding.plan "
    "(ShardContext, ShardPlan, run_partition) instead; this alias will be removed "
    "in polykernel 0.2.",
    PolykernelDeprecationWarning,
    stacklevel=2,
)
