"""Deprecated: now :mod:`polykernel.launcher.batching` (the warning is the
package's, :mod:`polykernel.gpu`)."""

from __future__ import annotations

from ..launcher.batching import BatchPlan, plan_batch

__all__ = ["BatchPlan", "plan_batch"]
