"""One process's part of a job-wide ``tune()`` (see :mod:`.job` for the protocol):
its slice of the cases tuned in turn, the results exchanged, the merged table
saved — or, when the job falls back, nothing saved and one warning."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import _jax_compat
from ..dispatch import agreement, writing
from ..dispatch.merge import union
from ..dispatch.store import JobStore, StoreGone
from .job import Fallback, JobTuning, warn_fallback
from .options import TuneOptions
from .report import TuneReport
from .runner import tune_platform

__all__ = ["tune_in_job"]


def _candidates(plans: Sequence[Any]) -> dict[str, str]:
    """What a vote says of the candidates: each platform's backends with their
    launch parameters, default and reference (identical on every process of one
    program)."""
    return {
        p.platform: repr((sorted(p.tunables.items()), p.default.token(),
                          p.reference.token()))
        for p in plans
    }  # fmt: skip


def _timed(report: TuneReport) -> list[list[str]]:
    """``[case, candidate]`` of every candidate this process timed."""
    return [
        [f"{c.key.platform} {c.label}", m.candidate.token()]
        for c in report.cases
        for m in c.measured
        if m.status == "ok"
    ]


def tune_in_job(
    store: JobStore,
    op: Any,
    plans: Sequence[Any],
    call: Callable[..., Any],
    key_of: Callable[..., Any],
    options: TuneOptions,
    save: bool,
    report: TuneReport,
    started: float,
) -> None:
    """Tune this process's slice of ``plans``; fill ``report`` (its ``job``
    says what the job did) and, with ``save``, write the job's merged table."""
    report.job = {"processes": store.count, "process": store.index}
    try:
        with JobTuning(store, op.name, options.max_seconds) as job, job.failing():
            cases = {plan.platform: plan.cases for plan in plans}
            owners = job.plan(cases, _candidates(plans))
            report.job["cases_in_job"] = sum(len(v) for v in owners.values())
            entries = []
            for plan in plans:
                mine = [
                    c for c, who in zip(plan.cases, owners[plan.platform], strict=True)
                    if who == store.index
                ]  # fmt: skip
                entries += tune_platform(
                    op, plan.platform, mine, call=call, key_of=key_of,
                    tunables=plan.tunables, reference=plan.reference,
                    default=plan.default, identity=plan.identity, options=options,
                    report=report, started=started,
                    turn=lambda p=plan.platform: job.turn(p),
                )  # fmt: skip
            new: dict[str, list[Any]] = {}
            for entry in entries:
                new.setdefault(entry.key.primitive, []).append(
                    writing.entry_json(entry)
                )
            result = {
                "process": store.index,
                "entries": new,
                "table": writing.own_entries() if save else {},
                "timed": _timed(report),
            }
            results = job.exchange(result)
    except (Fallback, StoreGone) as err:
        why = (
            str(err) if isinstance(err, Fallback) else f"the job's store failed: {err}"
        )
        report.job["outcome"] = f"fallback: {why}"
        report.notes.append(f"job fallback: {why}; nothing saved")
        warn_fallback(op.name, why)
        return
    report.job["outcome"] = "complete"
    report.job["timed"] = {r["process"]: r["timed"] for r in results}
    if save:
        # New entries first (lowest process first), then every process's table.
        merged = union([r["entries"] for r in results] + [r["table"] for r in results])
        report.saved_to = writing.replace_entries(merged)
    # Every process reaches this point (the outcome is complete for all): the
    # next lowering agrees on the new table.
    agreement.forget(op.name)
    _jax_compat.bump_dispatch_epoch()
