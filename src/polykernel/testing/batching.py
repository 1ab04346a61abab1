"""``vmap`` against a Python loop over the batch, for every ``in_axes`` pattern.

Each input is either unbatched (``None``) or batched along axis 0; every pattern
with at least one batched input is run, plus one with every input batched along its
last axis. A batched float input holds differently scaled copies of the input, a
boolean input rolled copies, so a rule that mixes up slices changes the result.
Integer inputs are repeated unchanged: they often index into other inputs (CSR
``indices`` and ``indptr``) and any other values could be out of range.
"""

from __future__ import annotations

import itertools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..benchmark.tolerance import compare_outputs, is_float
from .report import CheckResult
from .subject import Subject, error_text

__all__ = ["batch_patterns", "check_vmap"]

BATCH = 3
MAX_PATTERNS = 64
_SCALES = (1.0, 0.5, 1.5)


def batch_patterns(n_inputs: int) -> tuple[list[tuple[Any, ...]], str]:
    """The ``in_axes`` patterns to run and a note on what was left out."""
    if n_inputs == 0:
        return [], "the kernel has no inputs"
    patterns = [
        p
        for p in itertools.product((0, None), repeat=n_inputs)
        if any(a == 0 for a in p)
    ]
    note = ""
    if len(patterns) > MAX_PATTERNS:
        singles = [
            tuple(0 if j == i else None for j in range(n_inputs))
            for i in range(n_inputs)
        ]
        patterns = [(0,) * n_inputs, *singles]
        note = (
            f"{2**n_inputs - 1 - len(patterns)} patterns not run (over {MAX_PATTERNS})"
        )
    return [*patterns, ("last",) * n_inputs], note


def _variant(x: np.ndarray, b: int) -> np.ndarray:
    if is_float(x.dtype):
        return (x * np.asarray(_SCALES[b % len(_SCALES)], x.dtype)).astype(x.dtype)
    if x.dtype == np.bool_ and x.size:
        return np.roll(x, b)
    return x


def _batched(
    x: np.ndarray, axis: Any
) -> tuple[np.ndarray, list[np.ndarray], int | None]:
    """(stacked input, its slices in batch order, the in_axes entry)."""
    if axis is None:
        return x, [x] * BATCH, None
    slices = [_variant(x, b) for b in range(BATCH)]
    where = x.ndim if axis == "last" else 0
    return np.stack(slices, axis=where), slices, where


def check_vmap(subject: Subject, backend: str) -> list[CheckResult]:
    """One result per ``in_axes`` pattern (``"last"``: every input's last axis).

    All patterns are compiled as one program (one XLA compilation instead of one
    per pattern); if that fails, each pattern runs alone so the error is attributed.
    """
    patterns, note = batch_patterns(len(subject.args))
    if not patterns:
        return [subject.skipped("vmap_vs_loop", backend, note)]
    host = [np.asarray(a) for a in subject.args]
    cases = [[_batched(x, ax) for x, ax in zip(host, p, strict=True)] for p in patterns]
    fn = subject.function(backend)
    try:
        got_all = _run_vmaps(subject, fn, cases)
    except Exception:
        got_all = [None] * len(cases)
    want_all = _run_loops(subject, fn, cases)
    results = []
    for pattern, built, got, want in zip(
        patterns, cases, got_all, want_all, strict=True
    ):
        case = f"in_axes={_label(pattern, host)}"
        if got is None:
            try:
                got = _run_vmaps(subject, fn, [built])[0]
            except Exception as err:
                results.append(
                    subject.failed(
                        "vmap_vs_loop", backend, case, detail=error_text(err)
                    )
                )
                continue
        comparison = compare_outputs(got, want, subject.tolerances())
        results.append(
            subject.judged(
                "vmap_vs_loop", backend, comparison, case, subject.tolerance_label()
            )
        )
    unbatched = "(" + ", ".join(["None"] * len(host)) + ")"
    reason = "vmap needs at least one batched input"
    results.append(
        subject.skipped("vmap_vs_loop", backend, reason, f"in_axes={unbatched}")
    )
    if note:
        results.append(subject.skipped("vmap_vs_loop", backend, note))
    return results


def _run_vmaps(subject: Subject, fn: Any, cases: list[list[tuple]]) -> list[Any]:
    axes = [tuple(b[2] for b in built) for built in cases]
    inputs = [[b[0] for b in built] for built in cases]

    def all_patterns(inputs: list[list[Any]]) -> list[Any]:
        return [
            jax.vmap(fn, in_axes=a)(*ins) for a, ins in zip(axes, inputs, strict=True)
        ]

    with jax.default_device(subject.device):
        out = jax.jit(all_patterns)(inputs)
        return [[np.asarray(g) for g in outs] for outs in out]


def _varied(x: np.ndarray) -> bool:
    return is_float(x.dtype) or (x.dtype == np.bool_ and x.size > 0)


def _run_loops(subject: Subject, fn: Any, cases: list[list[tuple]]) -> list[Any]:
    """The reference: one call per batch element, outputs stacked along axis 0.

    The calls go into one jitted program, and nothing in it is batched, so each call
    sees exactly one slice. Patterns whose slices are the same (they differ only in
    batching repeated integer inputs) share one loop.
    """
    keys = [tuple(b[2] is not None and _varied(b[0]) for b in built) for built in cases]
    unique = list(dict.fromkeys(keys))
    first = [cases[keys.index(k)] for k in unique]
    slices = [[[b[1][i] for b in built] for i in range(BATCH)] for built in first]

    def loops(slices: list[list[list[Any]]]) -> list[list[Any]]:
        per_case = []
        for steps in slices:
            outs = [fn(*step) for step in steps]
            per_case.append([jnp.stack(list(k)) for k in zip(*outs, strict=True)])
        return per_case

    with jax.default_device(subject.device):
        out = jax.jit(loops)(slices)
    stacked = [[np.asarray(w) for w in outs] for outs in out]
    return [stacked[unique.index(k)] for k in keys]


def _label(pattern: tuple[Any, ...], host: list[np.ndarray]) -> str:
    if pattern and pattern[0] == "last":
        return "(" + ", ".join(str(x.ndim) for x in host) + ")"
    return "(" + ", ".join("None" if a is None else "0" for a in pattern) + ")"
