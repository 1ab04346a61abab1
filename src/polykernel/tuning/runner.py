"""``op.tune()``: time every (backend, launch parameters) of a primitive per case.

For each case (a ``BenchmarkConfig`` of the primitive's benchmark data, or the
user's), on each platform present:

1. the call function runs once and every bind of the primitive is captured
   (:mod:`.capture`): its operands, ``outs`` and static keywords;
2. each candidate (:mod:`.candidates`) is bound again eagerly, under its own
   ``jax.jit``, on **fresh copies** of the operands — never the caller's arrays, no
   aliasing onto them — and its outputs are compared with the reference's
   (``jax_raw``, else the platform's default backend) within the per-dtype
   tolerance: a candidate that differs is recorded as ``mismatch`` and can never
   be chosen; one that fails to build or run is recorded with its error;
3. the others are timed with the benchmark harness's interleaved, adaptive rounds
   (:func:`polykernel.benchmark.sampling.sample_interleaved`), and the fastest
   median wins; each backend's fastest is kept too.

Tuning never runs inside a traced program (``jit``, ``vmap``, ``grad``: refused by
:mod:`.session`). A budget (``max_seconds`` over the
whole run, ``max_candidates`` per case) bounds the search; what it cut is reported.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..benchmark.sampling import StopRule, sample_interleaved
from ..benchmark.tolerance import compare_outputs, tolerance_for
from ..settings.tuned_table import Choice, Key, TunedEntry
from .candidates import Candidate, Tunables, enumerate_candidates
from .capture import BoundCall, bound_calls
from .report import Measured, TunedCase, TuneReport

__all__ = ["TuneOptions", "tune_platform"]


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """How one tuning run goes (see ``XLACustomKernel.tune``)."""

    max_seconds: float = 120.0
    max_candidates: int | None = None
    n_warmup: int = 2
    n_runs: int = 10
    target_spread: float = 0.05
    case_seconds: float = 2.0
    rtol: float | None = None
    atol: float | None = None
    verbose: bool = False


@dataclasses.dataclass
class _Run:
    """The state of one run: the primitive's hooks and the clock."""

    op: Any
    platform: str
    key_of: Callable[[str, Sequence[Any], Any, Mapping[str, Any]], Key]
    tunables: Tunables
    reference: Candidate
    options: TuneOptions
    started: float
    report: TuneReport

    def left(self) -> float:
        return self.options.max_seconds - (time.perf_counter() - self.started)


def tune_platform(
    op: Any,
    platform: str,
    configs: Sequence[Any],
    *,
    call: Callable[..., Any],
    key_of: Callable[[str, Sequence[Any], Any, Mapping[str, Any]], Key],
    tunables: Tunables,
    reference: Candidate,
    options: TuneOptions,
    report: TuneReport,
) -> list[TunedEntry]:
    """Tune ``op`` on ``platform`` over ``configs``; add the cases to ``report`` and
    return the entries to record."""
    import jax

    device = jax.devices(platform)[0]
    run = _Run(
        op, platform, key_of, tunables, reference, options, time.perf_counter(), report
    )
    entries = []
    for config in configs:
        if run.left() <= 0:
            report.cut.append(f"{platform} {config.label}: not tuned (max_seconds)")
            continue
        placed = config.put_args(device)
        fn = functools.partial(call, **config.kernel_kwargs)
        for index, bound in enumerate(bound_calls(fn, placed.args, op.primitive)):
            label = config.label if index == 0 else f"{config.label} #{index}"
            case = _tune_call(run, label, bound, device)
            report.cases.append(case)
            if case.entry is not None:
                entries.append(case.entry)
    return entries


def _fresh(operands: Sequence[Any], device: Any) -> list[Any]:
    """Copies of ``operands`` in new device buffers (host round trip: no aliasing)."""
    import jax

    return [jax.device_put(np.array(x), device) for x in operands]


def _binder(run: _Run, bound: BoundCall, candidate: Candidate) -> Callable[..., Any]:
    import jax

    params = {**bound.statics, **dict(candidate.params)}
    outs = bound.params["outs"]
    prim = run.op.primitive
    return jax.jit(
        lambda *xs: prim.bind(*xs, outs=outs, backend=candidate.backend, **params)
    )


def _first_run(fn: Callable[..., Any], args: list[Any]) -> Any:
    import jax

    return [np.asarray(o) for o in jax.block_until_ready(fn(*args))]


def _tune_call(run: _Run, label: str, bound: BoundCall, device: Any) -> TunedCase:
    avals = [jax_aval(x) for x in bound.operands]
    key = run.key_of(run.platform, avals, bound.params["outs"], bound.statics)
    kept, cut = enumerate_candidates(run.tunables, run.options.max_candidates)
    case = TunedCase(
        label, key, [list(np.shape(x)) for x in bound.operands], run.reference.label
    )
    case.measured += [Measured(c, "cut", detail="max_candidates") for c in cut]
    want = _first_run(
        _binder(run, bound, run.reference), _fresh(bound.operands, device)
    )
    tols = [tolerance_for(w.dtype, run.options.rtol, run.options.atol) for w in want]
    timed: dict[str, tuple[Candidate, Callable[[], Any]]] = {}
    for candidate in kept:
        if run.left() <= 0:
            case.measured.append(Measured(candidate, "cut", detail="max_seconds"))
            continue
        fn, args = _binder(run, bound, candidate), _fresh(bound.operands, device)
        try:
            got = _first_run(fn, args)
        except Exception as err:  # recorded and skipped: a build or run failure
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            case.measured.append(
                Measured(
                    candidate, "error", detail=f"{type(err).__name__}: {first}"[:300]
                )
            )
            continue
        check = compare_outputs(got, want, tols)
        if not check.ok:
            case.measured.append(Measured(candidate, "mismatch", detail=check.detail))
            continue
        timed[candidate.label] = (candidate, functools.partial(fn, *args))
    _time(run, case, timed)
    case.entry = _entry(run, case, key)
    return case


def jax_aval(x: Any) -> Any:
    import jax

    return jax.ShapeDtypeStruct(np.shape(x), x.dtype)


#: A first pass times every candidate briefly; one slower than this many times the
#: fastest cannot win and leaves the rounds (its threads would only disturb the
#: others' timing), keeping its first-pass figures.
OUT_OF_RACE = 2.0


def _time(run: _Run, case: TunedCase, timed: dict[str, tuple[Candidate, Any]]) -> None:
    import jax

    if not timed:
        return
    calls = {name: fn for name, (_, fn) in timed.items()}
    slowest = 0.0
    for _ in range(run.options.n_warmup):
        for fn in calls.values():
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            slowest = max(slowest, time.perf_counter() - t0)
    # Each interval: settling calls, then enough calls to last ~1 ms, so a candidate
    # is timed as a loop calling it sees it (its threads awake, its data cached),
    # not cold after another candidate ran, while rounds still interleave them.
    batch = max(1, min(32, int(1e-3 / max(slowest, 1e-7))))
    sample = functools.partial(
        sample_interleaved,
        clock=time.perf_counter,
        block=jax.block_until_ready,
        n_batch_per_run=batch,
        n_settle=batch,
    )
    first = sample(calls, StopRule(3))
    medians = {n: float(np.median(t)) for n, t in first.times_s.items()}
    best = min(medians.values(), default=0.0)
    racing = {
        n: f
        for n, f in calls.items()
        if n in medians and medians[n] <= OUT_OF_RACE * best
    }
    budget = max(0.0, min(run.options.case_seconds, run.left()))
    sampled = sample(
        racing, StopRule(run.options.n_runs, run.options.target_spread, budget)
    )
    case.stopped_by = sampled.stopped_by
    errors = {**first.errors, **sampled.errors}
    times = {**first.times_s, **sampled.times_s}
    for name, (candidate, _) in timed.items():
        if name in errors:
            err = errors[name]
            detail = f"{type(err).__name__}: {err}"[:300]
            case.measured.append(Measured(candidate, "error", detail=detail))
            continue
        samples = times[name]
        median = float(np.median(samples))
        q1, q3 = np.percentile(samples, [25, 75])
        spread = float((q3 - q1) / median) if median > 0 else 0.0
        note = (
            ""
            if name in racing
            else f"out of the race after 3 rounds (>{OUT_OF_RACE}x)"
        )
        case.measured.append(Measured(candidate, "ok", median, spread, detail=note))


def _entry(run: _Run, case: TunedCase, key: Key) -> TunedEntry | None:
    ok = [m for m in case.measured if m.status == "ok" and m.median_s is not None]
    if not ok:
        return None
    best = min(ok, key=lambda m: m.median_s or 0.0)
    best.chosen = True
    per_backend: dict[str, Choice] = {}
    for m in sorted(ok, key=lambda m: m.median_s or 0.0):
        per_backend.setdefault(m.candidate.backend, m.choice())
    recorded = {
        "case": case.label,
        "shape": case.shapes,
        "machine": run.report.machine,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return TunedEntry(
        key,
        best.choice(),
        per_backend,
        tuple(m.to_json() for m in case.measured),
        recorded,
    )
