"""Checks of the forward computation: shapes, reference, jit, determinism."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from ..benchmark.tolerance import Comparison, compare_outputs
from .report import CheckResult
from .subject import Subject, error_text

__all__ = [
    "check_abstract_eval",
    "check_determinism",
    "check_jit_vs_eager",
    "check_reference",
]


def check_abstract_eval(
    subject: Subject, backend: str, outputs: list[np.ndarray]
) -> CheckResult:
    """Shapes and dtypes from abstract evaluation equal those of real outputs."""
    with jax.default_device(subject.device):
        abstract = jax.eval_shape(subject.function(backend), *subject.args)
    want = [(tuple(a.shape), np.dtype(a.dtype)) for a in abstract]
    got = [(tuple(o.shape), np.dtype(o.dtype)) for o in outputs]
    if want == got:
        return subject.passed("abstract_eval", backend, detail="shapes and dtypes")
    return subject.failed(
        "abstract_eval",
        backend,
        detail=f"abstract eval gives {_fmt(want)}, the kernel returned {_fmt(got)}",
    )


def _fmt(items: list[tuple[tuple[int, ...], np.dtype]]) -> str:
    return ", ".join(f"{d.name}{list(s)}" for s, d in items)


def check_reference(
    subject: Subject,
    backend: str,
    outputs: list[np.ndarray],
    reference: list[np.ndarray],
    label: str,
) -> CheckResult:
    """Outputs of ``backend`` agree with the reference's within tolerance."""
    comparison = compare_outputs(outputs, reference, subject.tolerances())
    return subject.judged(
        "backend_vs_reference",
        backend,
        comparison,
        case=f"vs {label}",
        tolerance=subject.tolerance_label(),
    )


def check_jit_vs_eager(
    subject: Subject, backend: str, eager: list[np.ndarray]
) -> CheckResult:
    """The call under ``jax.jit`` gives the eager outputs."""
    try:
        jitted = _run_jit(subject, backend)
    except Exception as err:
        return subject.failed("jit_vs_eager", backend, detail=error_text(err))
    comparison = compare_outputs(jitted, eager, subject.tolerances())
    return subject.judged(
        "jit_vs_eager", backend, comparison, tolerance=subject.tolerance_label()
    )


def check_determinism(subject: Subject, backend: str) -> CheckResult:
    """Two runs of the same compiled call give bit-identical outputs."""
    fn = subject.jitted(backend)
    with jax.default_device(subject.device):
        first = [np.asarray(o) for o in fn(*subject.args)]
        second = [np.asarray(o) for o in fn(*subject.args)]
    for k, (a, b) in enumerate(zip(first, second, strict=True)):
        if not np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"):
            changed = np.argwhere(~_bit_equal(a, b))
            first_bad = tuple(int(i) for i in changed[0]) if changed.size else ()
            worst = _max_abs_diff(a, b)
            return subject.failed(
                "determinism",
                backend,
                comparison=Comparison(False, worst, worst),
                detail=f"output {k}: {len(changed)} elements changed between two "
                f"identical runs; first at {first_bad}",
            )
    return subject.passed(
        "determinism", backend, comparison=Comparison(True, 0.0, 0.0), detail="bitwise"
    )


def _run_jit(subject: Subject, backend: str) -> list[np.ndarray]:
    with jax.default_device(subject.device):
        return [np.asarray(o) for o in subject.jitted(backend)(*subject.args)]


def _bit_equal(a: Any, b: Any) -> np.ndarray:
    if a.dtype.kind in "fc":
        return (a == b) | (np.isnan(a) & np.isnan(b))
    return a == b


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    if a.dtype == np.bool_:
        return float(np.sum(a != b) > 0)
    diff = np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) - b)
    return float(np.nanmax(diff)) if diff.size else 0.0
