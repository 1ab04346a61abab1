"""Per-dtype tolerances and the array comparison every check uses.

Two arrays agree when ``|got - want| <= atol * scale + rtol * |want|`` elementwise,
where ``scale = max(1, max |want|)``: the absolute part follows the magnitude of the
whole output, so entries that cancel to nearly zero are judged by the size of the
terms that produced them. NaNs must sit at the same places; integers and booleans
must be equal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

__all__ = [
    "Comparison",
    "Tolerance",
    "compare",
    "compare_outputs",
    "dot_rtol",
    "fd_rtol",
    "fd_step",
    "is_float",
    "tolerance_for",
]

# (rtol, atol) for comparing two implementations of the same kernel.
_DEFAULTS = {
    "float64": (1e-10, 1e-10),
    "complex128": (1e-10, 1e-10),
    "float32": (1e-5, 1e-5),
    "complex64": (1e-5, 1e-5),
    "float16": (2e-3, 2e-3),
    "bfloat16": (2e-2, 2e-2),
}
# Relative error allowed between a JVP and central finite differences.
_FD_RTOL = {"float64": 1e-6, "float32": 1e-2, "float16": 1e-1, "bfloat16": 1e-1}
# Relative error allowed in <ct, J t> = <J^T ct, t> and <grad, t> = jvp(t).
_DOT_RTOL = {"float64": 1e-10, "float32": 1e-4, "float16": 1e-2, "bfloat16": 3e-2}


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """``rtol`` and ``atol`` for one dtype (both 0 for exact comparison)."""

    rtol: float
    atol: float

    def __str__(self) -> str:
        if self.rtol == 0 and self.atol == 0:
            return "exact"
        return f"rtol={self.rtol:g} atol={self.atol:g}"


def _name(dtype: Any) -> str:
    return np.dtype(dtype).name


def is_float(dtype: Any) -> bool:
    """Floating or complex (has tangents and rounding error)."""
    return np.issubdtype(np.dtype(dtype), np.inexact) or _name(dtype) == "bfloat16"


def tolerance_for(
    dtype: Any, rtol: float | None = None, atol: float | None = None
) -> Tolerance:
    """Default tolerance of ``dtype``; ``rtol``/``atol`` override it for floats."""
    if not is_float(dtype):
        return Tolerance(0.0, 0.0)
    default_rtol, default_atol = _DEFAULTS.get(_name(dtype), _DEFAULTS["float32"])
    return Tolerance(
        default_rtol if rtol is None else float(rtol),
        default_atol if atol is None else float(atol),
    )


def _eps(dtype: Any) -> float:
    import jax.numpy as jnp

    return float(jnp.finfo(dtype).eps)


def fd_step(dtype: Any) -> float:
    """Central-difference step: the cube root of the machine epsilon."""
    return _eps(dtype) ** (1.0 / 3.0)


def fd_rtol(dtype: Any) -> float:
    return _FD_RTOL.get(_name(dtype), 1e-2)


def dot_rtol(dtype: Any) -> float:
    return _DOT_RTOL.get(_name(dtype), 1e-4)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """Outcome of comparing arrays: pass/fail, worst errors, and what differs."""

    ok: bool
    max_abs: float
    max_rel: float
    detail: str = ""


def _as_f64(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if np.iscomplexobj(arr):
        return arr.astype(np.complex128)
    return arr.astype(np.float64)


def compare(got: Any, want: Any, tol: Tolerance) -> Comparison:
    """Compare one output; ``detail`` names the count and first bad index."""
    got_a, want_a = np.asarray(got), np.asarray(want)
    if got_a.shape != want_a.shape:
        return Comparison(
            False, np.inf, np.inf, f"shape {got_a.shape} != {want_a.shape}"
        )
    if got_a.size == 0:
        return Comparison(True, 0.0, 0.0)
    g, w = _as_f64(got_a), _as_f64(want_a)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        same = (g == w) | (np.isnan(g) & np.isnan(w))  # equal infinities are same
        diff = np.where(same, 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff), np.inf, diff)
        finite_w = np.abs(w[np.isfinite(w)])
        scale = max(1.0, float(finite_w.max())) if finite_w.size else 1.0
        magnitude = np.abs(np.nan_to_num(w))
        bad = diff > tol.atol * scale + tol.rtol * magnitude
        rel = diff / np.maximum(magnitude, np.finfo(np.float64).tiny)
    max_abs, max_rel = float(diff.max()), float(np.where(same, 0.0, rel).max())
    if not bad.any():
        return Comparison(True, max_abs, max_rel)
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    detail = (
        f"{int(bad.sum())} of {bad.size} elements differ; first at {first}: "
        f"{got_a[first]} vs {want_a[first]}"
    )
    return Comparison(False, max_abs, max_rel, detail)


def compare_outputs(
    got: list[Any], want: list[Any], tols: list[Tolerance]
) -> Comparison:
    """Compare every output; the worst errors and the first failing output win."""
    if len(got) != len(want):
        return Comparison(
            False, np.inf, np.inf, f"{len(got)} outputs, expected {len(want)}"
        )
    results = [compare(g, w, t) for g, w, t in zip(got, want, tols, strict=True)]
    max_abs = max((r.max_abs for r in results), default=0.0)
    max_rel = max((r.max_rel for r in results), default=0.0)
    for k, r in enumerate(results):
        if not r.ok:
            return Comparison(False, max_abs, max_rel, f"output {k}: {r.detail}")
    return Comparison(True, max_abs, max_rel)
