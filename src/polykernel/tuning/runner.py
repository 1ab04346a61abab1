"""``op.tune()``: time every (backend, launch parameters) of a primitive per case.

For each case (a ``BenchmarkConfig`` of the primitive's benchmark data, or the
user's), on each platform present:

1. the call function runs once and every bind of the primitive is captured
   (:mod:`.capture`): its operands, ``outs`` and static keywords;
2. each candidate (:mod:`.candidates`) is bound again under its own ``jax.jit`` on
   **fresh copies** of the operands — never the caller's arrays — once, in a worker
   given its share of the budget (:mod:`.deadline`): one that does not return in
   time is abandoned (``timeout``), one that fails is recorded with its error, one
   whose outputs differ from the reference's (``jax_raw``, else the default; the
   next candidate that runs when those fail) beyond the per-dtype tolerance, or
   that **changed its inputs**, is a ``mismatch``: none of these is ever chosen;
3. the others are timed with interleaved, settled rounds in ``passes`` passes over
   all the cases (:mod:`.timing`), no interval starting after the budget's end;
   with ``contention``, once more with the machine's other cores busy
   (:mod:`.load`);
4. the winner is chosen by the one rule of :mod:`polykernel.dispatch.ranking`: the
   default unless a candidate is faster beyond the measured spread. The entry
   records every candidate *tried* (never those the budget left out) and the
   identity of every kernel it measured.

Tuning never runs inside a traced program (refused by :mod:`.session`).
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
from ..dispatch.ranking import Scored, choose
from ..dispatch.records import Entry, Key, Scope
from .candidates import Candidate, Tunables, enumerate_candidates
from .capture import BoundCall, bound_calls
from .deadline import DeadlineExceeded, call_with_deadline
from .load import busy_cores
from .options import TuneOptions
from .report import Measured, TunedCase, TuneReport
from .timing import OUT_OF_RACE, PassTimes, combine_passes, time_pass

__all__ = ["TuneOptions", "tune_platform"]

#: A candidate's first call (build, compile, one run) gets at least this share of
#: what is left of the budget (or all of it, when less is left).
MIN_SHARE_S = 10.0


@dataclasses.dataclass
class _Run:
    """The state of one platform's run: the primitive's hooks and the clock."""

    op: Any
    platform: str
    key_of: Callable[[str, Sequence[Any], Any, Mapping[str, Any]], Key]
    tunables: Tunables
    reference: Candidate
    default: Candidate
    identity: Callable[[str], str]
    options: TuneOptions
    started: float
    report: TuneReport
    to_try: int = 0

    def left(self) -> float:
        return self.options.max_seconds - (time.perf_counter() - self.started)

    @property
    def deadline(self) -> float:
        return self.started + self.options.max_seconds

    def share(self) -> float:
        """The time the next candidate's first call may take."""
        left = max(0.0, self.left())
        return min(left, max(MIN_SHARE_S, left / max(1, self.to_try)))


def tune_platform(
    op: Any,
    platform: str,
    configs: Sequence[Any],
    *,
    call: Callable[..., Any],
    key_of: Callable[[str, Sequence[Any], Any, Mapping[str, Any]], Key],
    tunables: Tunables,
    reference: Candidate,
    default: Candidate,
    identity: Callable[[str], str],
    options: TuneOptions,
    report: TuneReport,
    started: float,
) -> list[Entry]:
    """Tune ``op`` on ``platform`` over ``configs``; add the cases to ``report`` and
    return the entries to record."""
    import jax

    device = jax.devices(platform)[0]
    run = _Run(op, platform, key_of, tunables, reference, default, identity, options,
               started, report)  # fmt: skip
    prepared: list[_Prepared] = []
    kept_per_case = len(enumerate_candidates(tunables, options.max_candidates)[0])
    run.to_try = kept_per_case * len(configs)
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
            if item.timed and run.left() > 0:
                item.passes.append(_time_once(run, item))
    if options.contention:
        _loaded_pass(run, prepared)
    entries = []
    for item in prepared:
        missed = options.passes - len(item.passes)
        if item.timed and missed:
            report.cut.append(
                f"{platform} {item.case.label}: {missed} of {options.passes} passes "
                f"not run (max_seconds)"
            )
        _record(item)
        item.case.entry = _entry(run, item.case)
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
    loaded: PassTimes | None = None


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


@dataclasses.dataclass
class _Outcome:
    """A candidate's first call: its jitted bind and outputs, the inputs it
    changed, or what went wrong."""

    fn: Callable[..., Any] | None = None
    outputs: list[np.ndarray] | None = None
    changed: tuple[int, ...] = ()
    failure: Measured | None = None


def _attempt(run: _Run, bound: BoundCall, candidate: Candidate, host: list[np.ndarray],
             device: Any) -> _Outcome:  # fmt: skip
    """Run ``candidate`` once on fresh copies, within its share of the budget."""
    import jax

    share = run.share()
    run.to_try = max(0, run.to_try - 1)
    fn, args = _binder(run, bound, candidate), _fresh(bound.operands, device)

    def first() -> list[np.ndarray]:
        return [np.asarray(o) for o in jax.block_until_ready(fn(*args))]

    try:
        outputs = call_with_deadline(first, share)
    except DeadlineExceeded as err:
        note = (f"abandoned: {err} (its share of max_seconds); it may still be "
                f"running, so timings taken after it may be disturbed")  # fmt: skip
        if note not in run.report.notes:
            run.report.notes.append(f"{candidate.label}: {note}")
        return _Outcome(failure=Measured(candidate, "timeout", detail=str(err)))
    except Exception as err:  # recorded and skipped: a build or run failure
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
        detail = f"{type(err).__name__}: {first_line}"[:300]
        return _Outcome(failure=Measured(candidate, "error", detail=detail))
    changed = tuple(
        i for i, (a, h) in enumerate(zip(args, host, strict=True))
        if np.asarray(a).tobytes() != h.tobytes()
    )  # fmt: skip
    return _Outcome(fn, outputs, changed)


def _prepare(run: _Run, label: str, bound: BoundCall, device: Any) -> _Prepared:
    """Run every candidate once on fresh buffers; keep those whose outputs match
    the reference's and whose inputs are untouched."""
    avals = [jax_aval(x) for x in bound.operands]
    key = run.key_of(run.platform, avals, bound.params["outs"], bound.statics)
    kept, not_tried = enumerate_candidates(run.tunables, run.options.max_candidates)
    case = TunedCase(label, key, [list(np.shape(x)) for x in bound.operands], "")
    case.not_tried = not_tried
    host = [np.array(x) for x in bound.operands]
    outcomes: dict[str, _Outcome] = {}
    order = [run.reference, *(c for c in kept if c != run.reference)]
    for candidate in order:
        if run.left() <= 0:
            if candidate in kept:
                case.measured.append(Measured(candidate, "cut", detail="max_seconds"))
            continue
        outcomes[candidate.token()] = _attempt(run, bound, candidate, host, device)
    reference = _reference(run, order, outcomes, case)
    want = outcomes[reference.token()].outputs if reference is not None else None
    timed: dict[str, tuple[Candidate, Callable[..., Any]]] = {}
    for candidate in kept:
        outcome = outcomes.get(candidate.token())
        if outcome is None:
            continue
        if outcome.failure is not None:
            case.measured.append(outcome.failure)
        elif outcome.changed:
            which = ", ".join(f"input {i}" for i in outcome.changed)
            case.measured.append(Measured(
                candidate, "mismatch",
                detail=f"it wrote into its {which} (kernels must not change their "
                f"inputs; declare input_output_aliases to write in place)",
            ))  # fmt: skip
        elif want is None:
            case.measured.append(
                Measured(candidate, "error", detail="no reference ran")
            )
        else:
            tols = [
                tolerance_for(w.dtype, run.options.rtol, run.options.atol) for w in want
            ]
            check = compare_outputs(outcome.outputs or [], want, tols)
            if not check.ok:
                case.measured.append(
                    Measured(candidate, "mismatch", detail=check.detail)
                )
            else:
                assert outcome.fn is not None
                timed[candidate.label] = (candidate, outcome.fn)
    return _Prepared(case, timed, bound.operands, device)


def _reference(
    run: _Run, order: list[Candidate], outcomes: dict[str, _Outcome], case: TunedCase
) -> Candidate | None:
    """The candidate whose outputs the others are compared with: the reference,
    else the default, else the first that ran cleanly (said in the report)."""
    preferred = [run.reference, run.default, *order]
    for candidate in preferred:
        outcome = outcomes.get(candidate.token())
        if outcome is not None and outcome.failure is None and not outcome.changed:
            case.reference = candidate.label
            if candidate != run.reference:
                case.notes.append(
                    f"the reference {run.reference.label} did not run cleanly; "
                    f"outputs were compared with {candidate.label}'s"
                )
            return candidate
    case.reference = f"{run.reference.label} (did not run)"
    case.notes.append("no candidate ran cleanly: nothing was timed")
    return None


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
        calls,
        n_warmup=run.options.n_warmup,
        rule=rule,
        block=jax.block_until_ready,
        deadline=run.deadline,
    )


def _loaded_pass(run: _Run, prepared: list[_Prepared]) -> None:
    """One more pass of every case with the other cores busy (``contention``)."""
    todo = [item for item in prepared if len(item.timed) > 1]
    if not todo:
        return
    with busy_cores() as started:
        if not started:
            run.report.notes.append("contention: one core only, nothing to load")
            return
        for item in todo:
            if run.left() <= 0:
                where = f"{run.platform} {item.case.label}"
                run.report.cut.append(f"{where}: the contention pass (max_seconds)")
                continue
            item.loaded = _time_once(run, item)


def _record(item: _Prepared) -> None:
    """Add every timed candidate's combined figures (or its error) to the case."""
    if not item.passes:
        for candidate, _ in item.timed.values():
            item.case.measured.append(Measured(candidate, "cut", detail="max_seconds"))
        return
    item.case.stopped_by = item.passes[-1].stopped_by
    combined = combine_passes(item.passes)
    loaded = combine_passes([item.loaded]) if item.loaded is not None else {}
    for name, (candidate, _) in item.timed.items():
        found = combined.get(name)
        if found is None:
            item.case.measured.append(Measured(candidate, "cut", detail="max_seconds"))
            continue
        if found.error is not None:
            detail = f"{type(found.error).__name__}: {found.error}"[:300]
            item.case.measured.append(Measured(candidate, "error", detail=detail))
            continue
        note = "" if found.raced else f"out of the race (>{OUT_OF_RACE}x)"
        under = loaded.get(name)
        loaded_ratio = under.ratio if under and under.error is None else None
        item.case.measured.append(
            Measured(candidate, "ok", found.median_s, found.spread, note,
                     ratio=found.ratio, ratio_spread=found.ratio_spread,
                     ratio_error=found.ratio_error, rounds=found.rounds,
                     loaded_ratio=loaded_ratio)
        )  # fmt: skip


def _entry(run: _Run, case: TunedCase) -> Entry | None:
    """The case's entry: the winner by the one rule, every candidate tried."""
    ok = [m for m in case.measured if m.status == "ok" and m.median_s is not None]
    scored = [Scored(m, m.ratio, m.ratio_error, m.loaded_ratio) for m in ok]
    default = next((m for m in ok if m.candidate == run.default), None)
    picked = choose(scored, default=default)
    if picked is None:
        return None
    picked.item.chosen = True
    tried = [m for m in case.measured if m.status != "cut"]
    backends = sorted({m.candidate.backend for m in tried})
    recorded = {
        "case": case.label,
        "shape": case.shapes,
        "machine": run.report.machine,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "passes": run.options.passes,
        "contention": run.options.contention,
    }
    return Entry(
        case.key,
        Scope.TUNED,
        picked.item.candidate,
        run.default,
        tuple((b, run.identity(b)) for b in backends),
        tuple(m.record() for m in tried),
        recorded,
    )
