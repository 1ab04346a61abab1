"""Test tools for primitive authors: :func:`check_kernel`, the ``opcheck`` of JAX.

``check_kernel(op, *args, outs=...)`` runs every check on every backend of the
platforms present and returns a :class:`CheckReport` (``print`` it for a table);
``polykernel check`` runs it over registered primitives with their benchmark data.
One module per family of checks: ``forward`` (abstract eval, reference, jit,
determinism), ``batching`` (vmap vs loop), ``autodiff`` (JVP, transpose, grad).
"""

from ..benchmark.tolerance import Tolerance as Tolerance, tolerance_for as tolerance_for
from .report import (
    CheckReport as CheckReport,
    CheckResult as CheckResult,
    KernelCheckError as KernelCheckError,
)
from .runner import CHECKS as CHECKS, check_kernel as check_kernel

__all__ = [
    "CHECKS",
    "CheckReport",
    "CheckResult",
    "KernelCheckError",
    "Tolerance",
    "check_kernel",
    "tolerance_for",
]
