"""One case of a benchmark — a config on every backend of a plan — from its first
call to its records.

A case is *prepared* once (each backend jitted, its first call timed as compile
time, warmed up), *timed* in one or more passes (:func:`time_pass`: the backends
interleaved round by round, :mod:`.sampling`) and *finished* into one record per
backend (:func:`finish_case`). :func:`~.runner.run_benchmarks` runs a case's passes
apart in time, every other case's pass between two of them, so that each case meets
the states a machine goes through during the whole run (see there); with one pass
the three steps follow each other, as a case was always timed.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .compare import pick_reference
from .config import BenchmarkConfig
from .launch import launch_of
from .paired import pair_records
from .passes import merge_passes
from .plan import BenchmarkPlan
from .record import BenchmarkRecord, compute_stats
from .sampling import Sampled, StopRule, sample_interleaved

__all__ = ["ADAPTIVE_WARMUP_S", "MAX_SETTLE_CALLS", "Case", "CaseOptions"]
__all__ += ["finish_case", "prepare_case", "settle_calls", "time_pass"]

# An adaptive run warms each backend up for at least this long (besides n_warmup
# calls): on a shared machine the first tenths of a second of a loop can run in a
# slower state (caches, pages, the CPU's clock), which a steady first window would
# otherwise record as the answer.
ADAPTIVE_WARMUP_S = 0.2
#: At most this many settling calls before one interval.
MAX_SETTLE_CALLS = 1000


@dataclass(frozen=True)
class CaseOptions:
    """How every case of a run is timed (``run_benchmark``'s arguments, checked):
    the stopping rule, warm-up calls, calls per interval, the clock, the settling
    time before each interval, the reference and whether a backend that raises is
    a failed record (``catch_errors``) rather than the run's end."""

    rule: StopRule
    n_warmup: int
    n_batch_per_run: int
    clock: Callable[[], float]
    settle_s: float
    reference_backend: str | None
    catch_errors: bool


@dataclass
class Case:
    """A config of a plan, prepared: each backend's call on the config's data
    (on the device), its compile time and first output, the number of settling
    calls before each of its intervals, the records of backends that failed, and
    the passes timed so far."""

    plan: BenchmarkPlan
    cfg: BenchmarkConfig
    args: tuple[Any, ...]
    calls: dict[str, Callable[[], Any]] = field(default_factory=dict)
    compile_s: dict[str, float] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    settle: dict[str, int] = field(default_factory=dict)
    failed: dict[str, BenchmarkRecord] = field(default_factory=dict)
    passes: list[Sampled] = field(default_factory=list)


def block(x: Any) -> Any:
    import jax

    return jax.block_until_ready(x)


def caller(kernel: Any, backend: str, kw: dict[str, Any]) -> Callable[..., Any]:
    return lambda *a: kernel.call(*a, backend=backend, **kw)


def prepare_case(
    plan: BenchmarkPlan,
    cfg: BenchmarkConfig,
    device: Any,
    options: CaseOptions,
    progress: Any,
) -> Case:
    """``cfg``'s data on ``device`` and every backend of ``plan`` compiled and
    warmed up on it (a backend that raises is recorded as failed, unless
    ``options.catch_errors`` is false)."""
    case = Case(plan, cfg, cfg.put_args(device).args)
    for backend in plan.backends:
        if progress is not None:
            progress.advance(plan.kernel.name, cfg.name, backend)
        try:
            call, compile_s, output, settle = _prepare(case, backend, options)
        except Exception as err:
            if not options.catch_errors:
                raise
            case.failed[backend], case.outputs[backend] = _failed(cfg, backend, err)
            continue
        case.calls[backend], case.compile_s[backend] = call, compile_s
        case.outputs[backend], case.settle[backend] = output, settle
    return case


def _prepare(case: Case, backend: str, options: CaseOptions):
    """Jit the call on ``backend``; time its first call; run the warm-up calls;
    the number of settling calls ``options.settle_s`` takes (:func:`settle_calls`
    of the fastest warm-up call, the adaptive warm-up's included)."""
    import jax

    clock, args = options.clock, case.args
    fn = jax.jit(caller(case.plan.kernel, backend, case.cfg.kernel_kwargs))
    start = clock()
    output = block(fn(*args))
    compile_s = clock() - start
    fastest = float("inf")

    def warm_up() -> None:
        nonlocal fastest
        t0 = time.perf_counter()
        block(fn(*args))
        fastest = min(fastest, time.perf_counter() - t0)

    for _ in range(max(options.n_warmup, 1 if options.settle_s else 0)):
        warm_up()
    if options.rule.adaptive:
        until = time.perf_counter() + ADAPTIVE_WARMUP_S
        while time.perf_counter() < until:
            warm_up()
    settle = settle_calls(options.settle_s, fastest)
    return (lambda: fn(*args)), compile_s, output, settle


def settle_calls(settle_s: float, fastest_s: float) -> int:
    """How many calls of ``fastest_s`` seconds fill ``settle_s`` (at most
    :data:`MAX_SETTLE_CALLS`). ``fastest_s`` is the fastest of *every* warm-up call:
    the first calls after compiling run in a slower state (pages, caches), and a
    count taken from them alone moved from run to run with that state (for
    ``jax_raw`` on 10^6 floats: 4 settling calls in one run, 24 in the next).

    Example:
        >>> from polykernel.benchmark.case import settle_calls
        >>> [settle_calls(12e-3, 0.5e-3), settle_calls(12e-3, 1.0), settle_calls(0, 1)]
        [24, 0, 0]
    """
    return min(MAX_SETTLE_CALLS, int(settle_s / max(fastest_s, 1e-7)))


def time_pass(case: Case, rule: StopRule, options: CaseOptions) -> None:
    """Time one pass of ``case`` under ``rule`` (every backend still standing,
    interleaved); a backend that raises leaves the case's later passes."""
    sampled = sample_interleaved(
        case.calls,
        rule,
        n_batch_per_run=options.n_batch_per_run,
        clock=options.clock,
        block=block,
        catch_errors=options.catch_errors,
        n_settle=case.settle,
        paired_base=pick_reference(list(case.calls), options.reference_backend),
    )
    case.passes.append(sampled)
    for backend in sampled.errors:
        case.calls.pop(backend, None)


def finish_case(
    case: Case, options: CaseOptions, verbose: bool
) -> tuple[list[BenchmarkRecord], dict[str, Any]]:
    """One record per backend of the plan (in its order) from every pass of
    ``case``, and each backend's first output (``None`` where it failed)."""
    plan, cfg, rule = case.plan, case.cfg, options.rule
    sampled = merge_passes(case.passes)
    failed, outputs = dict(case.failed), dict(case.outputs)
    for backend, err in sampled.errors.items():
        failed[backend], outputs[backend] = _failed(cfg, backend, err)
    records = []
    for backend in plan.backends:
        rec = failed.get(backend) or _record(
            cfg, backend, case.compile_s[backend], rule, sampled
        )
        rec.platform, rec.primitive = plan.platform, plan.kernel.name
        rec.kernel_kwargs = dict(cfg.kernel_kwargs)
        rec.data_kwargs = dict(cfg.data_kwargs)
        rec.n_batch_per_run = options.n_batch_per_run
        if rec.success:  # the decision its lowering made: what ran, and why
            rec.passes = len(case.passes)
            call = caller(plan.kernel, backend, cfg.kernel_kwargs)
            launch = launch_of(plan.kernel, call, case.args, plan.platform)
            rec.launch_params, rec.launch_source = launch
        records.append(rec)
    # Each backend's time over the reference's, from every round (see .paired).
    base = pick_reference(list(sampled.times_s), options.reference_backend)
    pair_records(records, sampled.every_round, base)
    for rec in records if verbose else ():
        print(_verbose_line(plan.kernel.name, rec), file=sys.stdout, flush=True)
    return records, outputs


def _record(cfg, backend, compile_s, rule: StopRule, sampled: Sampled):
    stats = compute_stats(sampled.times_s[backend])
    throughput = unit = None
    if cfg.work is not None and stats.median_ms > 0:
        throughput = cfg.work[0] / (stats.median_ms * 1e-3)
        unit = f"{cfg.work[1]}/s"
    return BenchmarkRecord.from_stats(
        stats,
        platform="",
        backend=backend,
        label=cfg.name,
        throughput=throughput,
        throughput_unit=unit,
        compile_ms=compile_s * 1e3,
        spread_bound=rule.target_spread,
        stopped_by=sampled.stopped_by,
        n_sampled=sampled.rounds,
    )


def _failed(
    cfg: BenchmarkConfig, backend: str, err: BaseException
) -> tuple[BenchmarkRecord, None]:
    """The record of a backend that raised (and its output: none)."""
    msg = f"{type(err).__name__}: {err}".strip()
    nan = math.nan  # what the reference records for a failed run
    return BenchmarkRecord("", backend, cfg.name, nan, nan, nan, None, False, msg), None


def _verbose_line(name: str, rec: BenchmarkRecord) -> str:
    head = f"{name} [{rec.platform}] {rec.label} / {rec.backend}:"
    if not rec.success:
        return f"{head} FAILED: {rec.error}"
    noisy = f" (noisy: {rec.noise_note})" if rec.noisy else ""
    return (
        f"{head} median {rec.median_ms:.4g} ms, IQR {rec.iqr_ms:.3g} ms, "
        f"n={rec.n}, compile {rec.compile_ms:.4g} ms{noisy}"
    )
