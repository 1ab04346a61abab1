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
   (:func:`polykernel.benchmark.sampling.sample_interleaved`), in ``passes`` passes
   over all the cases, as :mod:`.timing` describes: the winner is the candidate
   with the smallest time relative to the fastest, round by round and pass by
   pass, and every candidate's ratio to it is recorded; each backend's fastest is
   kept too.

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

from ..benchmark.sampling import StopRule
from ..benchmark.tolerance import compare_outputs, tolerance_for
from ..settings.tuned_table import Choice, Key, TunedEntry
from .candidates import Candidate, Tunables, enumerate_candidates
from .capture import BoundCall, bound_calls
from .report import Measured, TunedCase, TuneReport
from .timing import OUT_OF_RACE, PassTimes, combine_passes, time_pass

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
    passes: int = 2
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
    prepared: list[_Prepared] = []
    for config in configs:
        if run.left() <= 0:
            report.cut.append(f"{platform} {config.label}: not tuned (max_seconds)")
            continue
        placed = config.put_args(device)
        fn = functools.partial(call, **config.kernel_kwargs)
        for index, bound in enumerate(bound_calls(fn, placed.args, op.primitive)):
            label = config.label if index == 0 else f"{config.label} #{index}"
            prepared.append(_prepare(run, label, bound, device))
            report.cases.append(prepared[-1].case)
    # Every case's first pass before any case's second: passes meet the machine in
    # different states (see .timing).
    for _ in range(options.passes):
        for item in prepared:
            if not item.timed:
                continue
            if run.left() <= 0 and item.passes:  # the first pass always runs
                item.skipped += 1
                continue
            item.passes.append(_time_once(run, item))
    entries = []
    for item in prepared:
        if item.skipped:
            report.cut.append(
                f"{platform} {item.case.label}: {item.skipped} of {options.passes} "
                f"passes not run (max_seconds)"
            )
        _record(item)
        item.case.entry = _entry(run, item.case, item.case.key)
        if item.case.entry is not None:
            entries.append(item.case.entry)
    return entries


@dataclasses.dataclass
class _Prepared:
    """One case, checked: the candidates to time (label -> (candidate, its jitted
    bind)), the operands they run on (copied afresh for each pass) and the passes
    timed so far."""

    case: TunedCase
    timed: dict[str, tuple[Candidate, Callable[..., Any]]]
    operands: Sequence[Any]
    device: Any
    passes: list[PassTimes] = dataclasses.field(default_factory=list)
    skipped: int = 0


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


def _prepare(run: _Run, label: str, bound: BoundCall, device: Any) -> _Prepared:
    """Build and run every candidate once on fresh buffers; keep those whose
    outputs match the reference's."""
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
    timed: dict[str, tuple[Candidate, Callable[..., Any]]] = {}
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
        timed[candidate.label] = (candidate, fn)
    return _Prepared(case, timed, bound.operands, device)


def jax_aval(x: Any) -> Any:
    import jax

    return jax.ShapeDtypeStruct(np.shape(x), x.dtype)


def _time_once(run: _Run, item: _Prepared) -> PassTimes:
    """One pass over one case, each candidate on its own fresh copy of the operands
    (dropped after the pass: a case holds no copies between its passes)."""
    import jax

    budget = max(0.0, min(run.options.case_seconds, run.left()))
    rule = StopRule(run.options.n_runs, run.options.target_spread, budget)
    calls = {
        name: functools.partial(fn, *_fresh(item.operands, item.device))
        for name, (_, fn) in item.timed.items()
    }
    return time_pass(
        calls, n_warmup=run.options.n_warmup, rule=rule, block=jax.block_until_ready
    )


def _record(item: _Prepared) -> None:
    """Add every timed candidate's combined figures (or its error) to the case."""
    if not item.passes:
        return
    item.case.stopped_by = item.passes[-1].stopped_by
    for name, found in combine_passes(item.passes).items():
        candidate = item.timed[name][0]
        if found.error is not None:
            detail = f"{type(found.error).__name__}: {found.error}"[:300]
            item.case.measured.append(Measured(candidate, "error", detail=detail))
            continue
        note = "" if found.raced else f"out of the race (>{OUT_OF_RACE}x)"
        item.case.measured.append(
            Measured(candidate, "ok", found.median_s, found.spread, note,
                     ratio=found.ratio, ratio_spread=found.ratio_spread)
        )  # fmt: skip


def _entry(run: _Run, case: TunedCase, key: Key) -> TunedEntry | None:
    ok = [m for m in case.measured if m.status == "ok" and m.median_s is not None]
    if not ok:
        return None
    ranked = sorted(ok, key=lambda m: (m.ratio, m.median_s or 0.0))
    best = ranked[0]
    best.chosen = True
    per_backend: dict[str, Choice] = {}
    for m in ranked:
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
