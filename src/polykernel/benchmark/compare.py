"""Cross-backend output comparison for one benchmark config."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._frames import PACKAGE_DIR, first_outside
from ..errors import BenchmarkMismatchWarning

__all__ = ["Comparison", "check_outputs", "compare_outputs", "pick_reference"]


@dataclass(frozen=True)
class Comparison:
    """Outcome of comparing one backend's output with the reference output."""

    matches: bool
    max_abs_diff: float
    detail: str = ""


def pick_reference(successful: list[str], requested: str | None = None) -> str | None:
    """Choose the reference backend among those that ran successfully.

    ``requested`` wins when it succeeded, then a reference backend (a pure-JAX
    implementation such as ``jax_raw``: the natural oracle), then the first one.

    Example:
        >>> from polykernel.benchmark.compare import pick_reference
        >>> pick_reference(["numba", "jax_raw"])
        'jax_raw'
    """
    if requested is not None and requested in successful:
        return requested
    from ..backends import reference_backends

    references = reference_backends()
    preferred = next((b for b in successful if b in references), None)
    return preferred or (successful[0] if successful else None)


def _leaf_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.size == 0:
        return 0.0
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        a, b = a.astype(np.int8), b.astype(np.int8)
    diff = np.abs(a.astype(np.complex128 if np.iscomplexobj(a) else np.float64) - b)
    both_nan = np.isnan(a) & np.isnan(b) if a.dtype.kind in "fc" else False
    diff = np.where(both_nan, 0.0, diff)
    return float(np.max(diff))


def compare_outputs(out: Any, ref: Any, *, rtol: float, atol: float) -> Comparison:
    """Compare two output pytrees leaf by leaf with ``allclose(rtol, atol)``.

    NaNs in the same places count as equal. Different tree structures or shapes
    never match.

    Example:
        >>> import numpy as np
        >>> from polykernel.benchmark.compare import compare_outputs
        >>> c = compare_outputs([np.ones(3)], [np.ones(3) + 1e-6], rtol=1e-3, atol=1e-3)
        >>> c.matches, f"{c.max_abs_diff:.0e}"
        (True, '1e-06')
    """
    import jax

    leaves, tree = jax.tree_util.tree_flatten(out)
    ref_leaves, ref_tree = jax.tree_util.tree_flatten(ref)
    if tree != ref_tree:
        return Comparison(False, float("inf"), f"output structure {tree} vs {ref_tree}")
    matches, worst = True, 0.0
    details = []
    for i, (x, y) in enumerate(zip(leaves, ref_leaves, strict=True)):
        a, b = np.asarray(x), np.asarray(y)
        if a.shape != b.shape:
            return Comparison(
                False, float("inf"), f"output {i}: shape {a.shape} vs {b.shape}"
            )
        ok = bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
        d = _leaf_diff(a, b)
        worst = max(worst, d)
        if not ok:
            matches = False
            details.append(f"output {i}: max |diff| {d:.4g}")
    return Comparison(matches, worst, "; ".join(details))


def check_outputs(records, outputs, cfg, name, rtol, atol, reference) -> None:
    """Compare each successful record's output of one config with the reference's
    (:func:`pick_reference`); record the outcome on the records and warn
    (``BenchmarkMismatchWarning``, at the first caller outside polykernel) for each
    disagreement."""
    ok = [r.backend for r in records if r.success]
    ref = pick_reference(ok, reference)
    if ref is None or len(ok) < 2:
        return
    for rec in records:
        if not rec.success:
            continue
        rec.reference_backend = ref
        if rec.backend == ref:
            continue
        cmp = compare_outputs(outputs[rec.backend], outputs[ref], rtol=rtol, atol=atol)
        rec.matches_reference, rec.max_abs_diff = cmp.matches, cmp.max_abs_diff
        if not cmp.matches:
            warnings.warn(
                f"benchmark of '{name}', config '{cfg.name}': backend "
                f"'{rec.backend}' disagrees with reference '{ref}' ({cmp.detail}; "
                f"rtol={rtol}, atol={atol}). The mismatch is recorded in "
                "BenchmarkResult.mismatches.",
                BenchmarkMismatchWarning,
                stacklevel=first_outside(PACKAGE_DIR)[1],  # the user's line
            )
