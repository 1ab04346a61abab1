"""One ``op.tune()`` call: its arguments checked, the platforms, cases and
candidates, then the winners saved.

:func:`run_tuning` checks every argument first (:mod:`.options`) and, when the
winners are to be saved, that the user's table can be written
(:func:`polykernel.dispatch.writing.check_writable`) — so a mistake is a clear
error before anything is measured, never after. It then picks the platforms (those
the primitive has kernels for and JAX has devices of), the cases (the benchmark
data per platform, or the caller's), the candidates (every registered backend
usable here, optionally only some, each with its launch parameters), the reference
(``jax_raw`` when registered, else the default) and the default (what a call gets
untuned); it runs :func:`.runner.tune_platform` per platform under one time budget
and records the winners in the user's tuned table, after which functions jitted
earlier lower again on their next call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .. import _jax_compat, backends as backend_table
from ..benchmark.machine import machine_info
from ..dispatch import writing
from ..dispatch.agreement import job_store
from ..errors import TuningError, TuningTypeError
from .candidates import Candidate
from .options import check_backends, check_configs, check_options, check_platforms
from .report import TuneReport
from .runner import tune_platform

__all__ = ["run_tuning"]


def _platforms(op: Any, wanted: list[str] | None) -> list[str]:
    import jax

    have = [p for p in ("cpu", "gpu", "tpu") if op.available_backends(p)]
    chosen = have if wanted is None else [p for p in wanted if p in have]
    if wanted is not None and len(chosen) != len(wanted):
        missing = sorted(set(wanted) - set(have))
        raise TuningError(
            f"XLACustomKernel '{op.name}'.tune(): no kernels for platform(s) "
            f"{missing} (it has kernels for {have})."
        )
    present = []
    for p in chosen:
        try:
            jax.devices(p)
            present.append(p)
        except RuntimeError:
            if wanted is not None:
                raise TuningError(
                    f"XLACustomKernel '{op.name}'.tune(): JAX has no '{p}' device "
                    f"here; tune on a machine that has one."
                ) from None
    if not present:
        raise TuningError(
            f"XLACustomKernel '{op.name}'.tune(): none of its platforms {have} has a "
            f"device here."
        )
    return present


def _usable(name: str, platform: str) -> bool:
    backend = backend_table.lookup(name)
    return backend is None or backend.usable(platform, platform == "gpu")[0]


def _tunables(op: Any, platform: str, only: Sequence[str] | None) -> dict[str, Any]:
    found = {
        b: spec
        for b, spec in op.tunables(platform).items()
        if (only is None or b in only) and _usable(b, platform)
    }
    if not found:
        raise TuningError(
            f"XLACustomKernel '{op.name}'.tune(): no backend to tune on {platform} "
            f"(registered: {op.available_backends(platform)}, asked for: {only})."
        )
    return found


def _reference(op: Any, platform: str, default: Candidate) -> Candidate:
    registered = op.tunables(platform)
    refs = [
        b
        for b in registered
        if (bk := backend_table.lookup(b)) is not None and bk.reference
    ]
    if not refs:
        return default
    return Candidate.of(refs[0], {n: values[0] for n, values in registered[refs[0]]})


def _configs(op: Any, platform: str, given: list[Any] | None) -> list[Any]:
    """The cases on ``platform``: the caller's, else the benchmark data's."""
    if given is not None:
        return given
    data = op.benchmark_data_function
    if data is None:
        raise TuningError(
            f"XLACustomKernel '{op.name}'.tune(): no cases: register benchmark "
            f"data with def_benchmark_data(fn), or pass "
            f"configs=[BenchmarkConfig(...)]."
        )
    what = f"the benchmark data function's result for platform {platform!r}"
    return check_configs(op.name, data(platform=platform), what)


def run_tuning(
    op: Any,
    *,
    platform: Any,
    configs: Any,
    backends: Any,
    save: Any,
    key_of: Callable[..., Any],
    registered: Callable[[str], Any],
    max_seconds: Any,
    max_candidates: Any,
    verbose: Any,
    rtol: Any,
    atol: Any,
    target_spread: Any,
    case_seconds: Any,
    passes: Any,
    contention: Any = False,
) -> TuneReport:
    """See ``XLACustomKernel.tune``."""
    started = time.perf_counter()
    where = f"XLACustomKernel '{op.name}'.tune()"
    if _jax_compat.tracing():
        raise TuningError(
            f"{where}: tuning runs kernels eagerly on fresh buffers and cannot run "
            f"inside jit, vmap or grad (it was called inside a traced function). "
            f"Call it at the top level, before jitting."
        )
    options = check_options(
        op.name, max_seconds=max_seconds, max_candidates=max_candidates,
        target_spread=target_spread, case_seconds=case_seconds, passes=passes,
        rtol=rtol, atol=atol, verbose=verbose, contention=contention,
    )  # fmt: skip
    if not isinstance(save, bool):
        raise TuningTypeError(
            f"{where}: save must be True or False, got {type(save).__name__}: "
            f"{save!r:.60}."
        )
    given = None if configs is None else check_configs(op.name, configs)
    wanted = check_platforms(op.name, platform)
    every = sorted({b for p in ("cpu", "gpu", "tpu") for b in op.available_backends(p)})
    only = check_backends(op.name, backends, every)
    platforms = _platforms(op, wanted)
    if save:
        writing.check_writable()
    plans = [_plan(op, p, given, only, registered(p)) for p in platforms]
    report = TuneReport(op.name, machine=machine_info(), passes=options.passes)
    call = op.call if op.call_function is not None else op
    store = job_store()
    if store is not None:  # a jax.distributed job: tuned once, saved alike
        from .job_run import tune_in_job

        tune_in_job(store, op, plans, call, key_of, options, save, report, started)
        if options.verbose:
            print(report.table())
        return report
    entries = []
    for plan in plans:
        entries += tune_platform(
            op, plan.platform, plan.cases, call=call, key_of=key_of,
            tunables=plan.tunables, reference=plan.reference, default=plan.default,
            identity=plan.identity, options=options, report=report, started=started,
        )  # fmt: skip
    if save and entries:
        _save(report, entries)
    if options.verbose:
        print(report.table())
    return report


class _Plan(NamedTuple):
    """One platform's run: its cases, candidates, default, reference and kernel
    identities."""

    platform: str
    cases: list[Any]
    tunables: dict[str, Any]
    default: Candidate
    reference: Candidate
    identity: Callable[[str], str]


def _plan(
    op: Any, platform: str, given: list[Any] | None, only: Any, kernels: Any
) -> _Plan:
    """What tuning ``platform`` needs (``kernels``: the registered kernels there)."""
    first = {n: c[0] for n, c in kernels.kernels[kernels.default]}
    default = Candidate.of(kernels.default, first)
    return _Plan(
        platform,
        _configs(op, platform, given),
        _tunables(op, platform, only),
        default,
        _reference(op, platform, default),
        kernels.identity,
    )


def _save(report: TuneReport, entries: list[Any]) -> None:
    """Record ``entries`` in the user's table; then lowerings decide again."""
    try:
        report.saved_to = writing.record_entries(entries)
    except TuningError as err:  # raced since the check: the report stays on it
        err.report = report  # type: ignore[attr-defined]
        raise
    _jax_compat.bump_dispatch_epoch()
