"""One ``op.tune()`` call: which platforms, cases and candidates, then save.

:func:`run_tuning` picks the platforms (those the primitive has kernels for and JAX
has devices of), the cases (the benchmark data per platform, or the caller's), the
candidates (every registered backend usable here, optionally filtered, each with its
tunable parameters) and the reference (``jax_raw`` when registered, else the
platform's default backend with its first parameters); it runs
:func:`.runner.tune_platform` per platform under one time budget and records the
winners in the user's tuned table (:mod:`polykernel.settings.tuned_table`), after
which functions jitted earlier lower again on their next call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import _jax_compat, backends as backend_table
from ..benchmark.machine import machine_info
from ..errors import TuningError
from ..settings.tuned_table import record_entries
from .candidates import Candidate
from .report import TuneReport
from .runner import TuneOptions, tune_platform

__all__ = ["run_tuning"]


def _platforms(op: Any, platform: str | Sequence[str] | None) -> list[str]:
    import jax

    wanted = [platform] if isinstance(platform, str) else platform
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


def _reference(op: Any, platform: str) -> Candidate:
    registered = op.tunables(platform)
    refs = [
        b
        for b in registered
        if (bk := backend_table.lookup(b)) is not None and bk.reference
    ]
    name = refs[0] if refs else op.get_default(platform)
    spec = registered[name]
    return Candidate(name, tuple((n, values[0]) for n, values in spec))


def _configs(op: Any, platform: str, configs: Sequence[Any] | None) -> list[Any]:
    if configs is not None:
        return list(configs)
    data = op.benchmark_data_function
    if data is None:
        raise TuningError(
            f"XLACustomKernel '{op.name}'.tune(): no cases: register benchmark data "
            f"with def_benchmark_data(fn), or pass configs=[BenchmarkConfig(...)]."
        )
    return list(data(platform=platform))


def run_tuning(
    op: Any,
    *,
    platform: str | Sequence[str] | None,
    configs: Sequence[Any] | None,
    backends: Sequence[str] | None,
    save: bool,
    key_of: Callable[..., Any],
    max_seconds: float,
    max_candidates: int | None,
    verbose: bool,
    rtol: float | None,
    atol: float | None,
    target_spread: float,
    case_seconds: float,
    passes: int,
) -> TuneReport:
    """See ``XLACustomKernel.tune``."""
    if _jax_compat.tracing():
        raise TuningError(
            f"XLACustomKernel '{op.name}'.tune(): tuning runs kernels eagerly on fresh "
            f"buffers and cannot run inside jit, vmap or grad (it was called inside a "
            f"traced function). Call it at the top level, before jitting."
        )
    if isinstance(passes, bool) or not isinstance(passes, int) or passes < 1:
        raise TuningError(
            f"XLACustomKernel '{op.name}'.tune(): passes must be an integer >= 1 (how "
            f"many times every case is timed), got {passes!r}."
        )
    options = TuneOptions(
        max_seconds,
        max_candidates,
        n_runs=10,
        target_spread=target_spread,
        case_seconds=case_seconds,
        passes=passes,
        rtol=rtol,
        atol=atol,
        verbose=verbose,
    )
    report = TuneReport(op.name, machine=machine_info(), passes=passes)
    call = op.call if op.call_function is not None else op
    entries = []
    for p in _platforms(op, platform):
        entries += tune_platform(
            op,
            p,
            _configs(op, p, configs),
            call=call,
            key_of=key_of,
            tunables=_tunables(op, p, backends),
            reference=_reference(op, p),
            options=options,
            report=report,
        )
    if save and entries:
        report.saved_to = record_entries(entries)
        _jax_compat.bump_dispatch_epoch()
    if verbose:
        print(report.table())
    return report
