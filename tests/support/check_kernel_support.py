"""What the ``check_kernel`` tests share: one input, its spec, fresh primitives, and
the report read back as statuses."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

import polykernel as pk

_ids = itertools.count()
N = 8
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)
X = np.linspace(-1.0, 1.0, N, dtype=np.float32)
# The header of a report's table, split at white space.
TABLE_HEADER = ["check", "backend", "platform", "case", "status", "max", "abs", "max",
                "rel"]  # fmt: skip


def new_op(label: str) -> pk.XLACustomKernel:
    """A primitive of a name no other test uses."""
    return pk.XLACustomKernel(f"test.check_kernel.{label}{next(_ids)}")


def statuses(report, check: str) -> dict[tuple[str, str], str]:
    """``check``'s rows: (backend, case) -> status."""
    return {(r.backend, r.case): r.status for r in report if r.check == check}


def failed(report) -> set[tuple[str, str, str]]:
    """The failed rows as (check, backend, case)."""
    return {(r.check, r.backend, r.case) for r in report.failures}
