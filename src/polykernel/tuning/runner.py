"""``op.tune()``: time every (backend, launch parameters) of a primitive per case.

For each case (a ``BenchmarkConfig`` of the primitive's benchmark data, or the
user's), on each platform present:

1. the call function runs once and every bind of the primitive is captured
   (:mod:`.capture`): its operands, ``outs`` and static keywords (no candidate runs
   there: the primitive's binds are evaluated by the ``jax_raw`` reference);
2. each candidate (:mod:`.candidates`) is bound again under its own ``jax.jit`` on
   **fresh copies** of the operands — never the caller's arrays — once, in a worker
   given its share of the budget (:mod:`.first_call`): one that does not return in
   time is abandoned (``timeout``, and not run again in later cases), one that
   fails is recorded with its error, one whose outputs differ from the reference's
   (``jax_raw``, else the default; the next candidate that runs when those fail)
   beyond the per-dtype tolerance, or that **changed its inputs**, is a
   ``mismatch``: none of these is ever chosen;
3. the others are timed with interleaved, settled rounds in ``passes`` passes over
   all the cases (:mod:`.timing`), each case of a pass given at most an equal
   share of what is left of the budget, no interval starting after its end; with
   ``contention``, once more with the machine's other cores busy (:mod:`.load`);
4. the winner is chosen by the one rule of :mod:`polykernel.dispatch.ranking`
   (:mod:`.results`): the default unless a candidate is faster beyond the measured
   spread. The entry records every candidate *tried* (never those the budget left
   out) and the identity of every kernel it measured.

Tuning never runs inside a traced program (refused by :mod:`.session`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from .. import backends as backend_table
from ..benchmark.sampling import StopRule
from ..benchmark.tolerance import compare_outputs, tolerance_for
from ..dispatch.records import Entry, Key
from . import results
from .candidates import Candidate, Tunables, enumerate_candidates
from .capture import BoundCall, Evaluate, bound_calls
from .first_call import Outcome, first_call, fresh
from .load import busy_cores
from .options import TuneOptions
from .programs import Same, one_per_program
from .report import Measured, TunedCase, TuneReport
from .timing import PassTimes, time_pass

__all__ = ["TuneOptions", "tune_platform"]

#: A candidate's first call (build, compile, one run) gets at least this share of
#: what is left of the budget (or all of it, when less is left).
MIN_SHARE_S = 10.0


@dataclasses.dataclass
class _Run:
    """The state of one platform's run: the primitive's hooks, the clock, the
    first calls still to make and the candidates abandoned (token -> the case)."""

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
    abandoned: dict[str, str] = dataclasses.field(default_factory=dict)

    def left(self) -> float:
        return self.options.max_seconds - (time.perf_counter() - self.started)

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
    turn: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
) -> list[Entry]:
    """Tune ``op`` on ``platform`` over ``configs``; add the cases to ``report`` and
    return the entries to record. Timing runs inside ``turn()`` (in a job, this
    process's turn on its host's cores: see :mod:`.job`)."""
    import jax

    device = jax.local_devices(backend=platform)[0]
    run = _Run(op, platform, key_of, tunables, reference, default, identity, options,
               started, report)  # fmt: skip
    run.to_try = len(_order(run)) * len(configs)
    prepared = [
        _prepare(run, label, bound, device)
        for config in configs
        for label, bound in _captured(run, config, device, call)
    ]
    report.cases += [item.case for item in prepared]
    # Every case's first pass before any case's second: passes meet the machine in
    # different states (see .timing).
    with turn():
        for _ in range(options.passes):
            _time_pass(run, [item for item in prepared if item.timed])
        if options.contention:
            _loaded_pass(run, prepared)
    for item in prepared:
        missed = options.passes - len(item.passes)
        if item.timed and missed:
            report.cut.append(
                f"{platform} {item.case.label}: {missed} of {options.passes} passes "
                f"not run (max_seconds)"
            )
        results.record(item.case, item.timed, item.passes, item.loaded, item.same)
        item.case.entry = results.entry(
            item.case, run.default, run.identity, report.machine, options
        )
    return [item.case.entry for item in prepared if item.case.entry is not None]


def _evaluate(run: _Run) -> Evaluate | None:
    """How capture evaluates the primitive's own binds: with the reference, when it
    is a registered reference backend (``jax_raw``); else None (zeros)."""
    found = backend_table.lookup(run.reference.backend)
    if found is None or not found.reference:
        return None
    prim, ref = run.op.primitive, run.reference

    def evaluate(ins: Sequence[Any], params: dict[str, Any]) -> Sequence[Any]:
        params = {**params, "backend": ref.backend, **dict(ref.params)}
        result = prim.bind(*ins, **params)
        return list(result) if prim.multiple_results else [result]

    return evaluate


def _captured(
    run: _Run, config: Any, device: Any, call: Callable[..., Any]
) -> list[tuple[str, BoundCall]]:
    """``(label, bind)`` of every bind of the primitive in one case (none when the
    budget is spent)."""
    if run.left() <= 0:
        run.report.cut.append(f"{run.platform} {config.label}: not tuned (max_seconds)")
        return []
    placed = config.put_args(device)
    fn = functools.partial(call, **config.kernel_kwargs)
    binds = bound_calls(fn, placed.args, run.op.primitive, _evaluate(run))
    if any(b.after_zeros for b in binds):
        run.report.notes.append(
            f"{config.label}: no reference evaluated the primitive while its binds "
            f"were captured; a bind fed by an earlier one was timed on zeros"
        )
    return [
        (config.label if i == 0 else f"{config.label} #{i}", bound)
        for i, bound in enumerate(binds)
    ]


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
    #: Candidates not timed: the same program as a timed one (label -> (candidate,
    #: that one's label); :mod:`.programs`).
    same: Same = dataclasses.field(default_factory=dict)


def _order(run: _Run) -> list[Candidate]:
    """The first calls of one case: the reference first, then the candidates kept."""
    kept, _ = enumerate_candidates(run.tunables, run.options.max_candidates)
    return [run.reference, *(c for c in kept if c != run.reference)]


def _attempt(
    run: _Run, case: TunedCase, bound: BoundCall, candidate: Candidate,
    host: list[np.ndarray], device: Any,
) -> Outcome:  # fmt: skip
    """``candidate``'s first call within its share of the budget (not made again
    after it was abandoned in an earlier case)."""
    token = candidate.token()
    share = run.share()
    run.to_try = max(0, run.to_try - 1)
    if token in run.abandoned:
        detail = f"not run: abandoned in case {run.abandoned[token]}"
        return Outcome(failure=Measured(candidate, "timeout", detail=detail))
    outcome = first_call(run.op.primitive, bound, candidate, host, device, share)
    if outcome.failure is not None and outcome.failure.status == "timeout":
        run.abandoned[token] = case.label
        run.report.notes.append(
            f"{candidate.label}: abandoned in {case.label}: {outcome.failure.detail} "
            f"(its share of max_seconds); it may still be running, so timings taken "
            f"after it may be disturbed"
        )
    return outcome


def _prepare(run: _Run, label: str, bound: BoundCall, device: Any) -> _Prepared:
    """Run every candidate once on fresh buffers; keep those whose outputs match
    the reference's and whose inputs are untouched."""
    avals = [jax_aval(x) for x in bound.operands]
    key = run.key_of(run.platform, avals, bound.params["outs"], bound.statics)
    kept, not_tried = enumerate_candidates(run.tunables, run.options.max_candidates)
    case = TunedCase(label, key, [list(np.shape(x)) for x in bound.operands], "")
    case.not_tried = not_tried
    host = [np.array(x) for x in bound.operands]
    outcomes: dict[str, Outcome] = {}
    order = _order(run)
    for candidate in order:
        if run.left() <= 0:
            if candidate in kept:
                case.measured.append(Measured(candidate, "cut", detail="max_seconds"))
            continue
        outcomes[candidate.token()] = _attempt(run, case, bound, candidate, host,
                                               device)  # fmt: skip
    reference = _reference(run, order, outcomes, case)
    want = outcomes[reference.token()].outputs if reference is not None else None
    timed: dict[str, tuple[Candidate, Callable[..., Any]]] = {}
    for candidate in kept:
        outcome = outcomes.get(candidate.token())
        if outcome is None:
            continue
        refused = _refusal(run, candidate, outcome, want)
        if refused is not None:
            case.measured.append(refused)
        else:
            assert outcome.fn is not None
            timed[candidate.label] = (candidate, outcome.fn)
    timed, same = one_per_program(timed, run.default, bound.operands)
    return _Prepared(case, timed, bound.operands, device, same=same)


def _refusal(
    run: _Run, candidate: Candidate, outcome: Outcome, want: list[np.ndarray] | None
) -> Measured | None:
    """Why ``candidate`` is not timed (None: it is)."""
    if outcome.failure is not None:
        return outcome.failure
    if outcome.changed:
        which = ", ".join(f"input {i}" for i in outcome.changed)
        return Measured(
            candidate, "mismatch",
            detail=f"it wrote into its {which} (kernels must not change their "
            f"inputs; declare input_output_aliases to write in place)",
        )  # fmt: skip
    if want is None:
        return Measured(candidate, "error", detail="no reference ran")
    tols = [tolerance_for(w.dtype, run.options.rtol, run.options.atol) for w in want]
    check = compare_outputs(outcome.outputs or [], want, tols)
    return None if check.ok else Measured(candidate, "mismatch", detail=check.detail)


def _reference(
    run: _Run, order: list[Candidate], outcomes: dict[str, Outcome], case: TunedCase
) -> Candidate | None:
    """The candidate whose outputs the others are compared with: the reference,
    else the default, else the first that ran cleanly (said in the report)."""
    preferred = [run.reference, run.default, *order]
    for candidate in preferred:
        outcome = outcomes.get(candidate.token())
        if outcome is not None and outcome.clean:
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


def _shares(
    run: _Run, items: list[_Prepared]
) -> Iterator[tuple[_Prepared, float | None]]:
    """Each of ``items`` with the end of its equal share of what is left of the
    budget (None: spent), so every case gets its pass before the budget ends."""
    for index, item in enumerate(items):
        left = run.left()
        end = time.perf_counter() + left / (len(items) - index) if left > 0 else None
        yield item, end


def _time_pass(run: _Run, items: list[_Prepared]) -> None:
    """One pass over ``items`` (a pass that timed nothing is not kept)."""
    for item, deadline in _shares(run, items):
        if deadline is None:
            return
        timed = _time_once(run, item, deadline)
        if timed.candidates:
            item.passes.append(timed)


def _time_once(run: _Run, item: _Prepared, deadline: float) -> PassTimes:
    """One pass over one case, each candidate on its own fresh copy of the operands
    (dropped after the pass: a case holds no copies between its passes); no
    interval starts after ``deadline``."""
    import jax

    budget = max(0.0, min(run.options.case_seconds, deadline - time.perf_counter()))
    rule = StopRule(run.options.n_runs, run.options.target_spread, budget)
    calls = {
        name: functools.partial(fn, *fresh(item.operands, item.device))
        for name, (_, fn) in item.timed.items()
    }
    return time_pass(
        calls,
        n_warmup=run.options.n_warmup,
        rule=rule,
        block=jax.block_until_ready,
        deadline=deadline,
        # The candidate a winner replaces is timed as long as the winner.
        keep=[name for name, (c, _) in item.timed.items() if c == run.default],
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
        for item, deadline in _shares(run, todo):
            if deadline is None:
                where = f"{run.platform} {item.case.label}"
                run.report.cut.append(f"{where}: the contention pass (max_seconds)")
            else:
                item.loaded = _time_once(run, item, deadline)
