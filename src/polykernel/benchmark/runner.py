"""``run_benchmark``: every config of a primitive on every backend of a platform.

``XLACustomKernel.benchmark(...)`` forwards here. For each config the call function
is jitted once per backend; the first call is timed apart as compile time, then the
warm-up calls run, then the backends are timed together, interleaved round by round
(:mod:`.sampling`): a fixed ``n_runs`` intervals each, or — with ``target_spread`` —
until every backend's spread (IQR / median) is within the bound or the case's time
budget is spent. Outputs are compared across backends and every disagreement is
recorded on the records (and in ``BenchmarkResult.mismatches``). The result carries
the machine and the load the run met (:mod:`.machine`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import BenchmarkTypeError, BenchmarkValueError
from .compare import check_outputs, pick_reference
from .config import BenchmarkConfig
from .defaults import kernel_set
from .launch import launch_of
from .machine import LoadMonitor, machine_info
from .paired import pair_records
from .plan import BenchmarkPlan, check_plan, plan_benchmark
from .record import BenchmarkRecord, compute_stats
from .result import BenchmarkResult
from .sampling import Sampled, StopRule, check_rule, sample_interleaved
from .timing import check_counts

__all__ = ["BenchmarkPlan", "plan_benchmark", "run_benchmark"]


def _device(platform: str) -> Any:
    import jax

    try:
        return jax.local_devices(backend=platform)[0]
    except RuntimeError as err:
        from .._jax_compat import all_devices

        have = sorted({d.platform for d in all_devices()})
        raise BenchmarkValueError(
            f"benchmark: platform '{platform}' is not available to JAX in this "
            f"process (available: {have}). Run on a machine with that platform or "
            f"choose one of {have}."
        ) from err


def _block(x: Any) -> Any:
    import jax

    return jax.block_until_ready(x)


# An adaptive run warms each backend up for at least this long (besides n_warmup
# calls): on a shared machine the first tenths of a second of a loop can run in a
# slower state (caches, pages, the CPU's clock), which a steady first window would
# otherwise record as the answer.
ADAPTIVE_WARMUP_S = 0.2
#: ``settle_s`` of ``polykernel benchmark`` and the demo: longer than a thread pool
#: spins after its last parallel region (an OpenMP pool about 8 ms after a Numba
#: ``parallel=True`` kernel here, XLA's about 2 ms), as the tuner settles.
SETTLE_S = 12e-3
#: At most this many settling calls before one interval.
MAX_SETTLE_CALLS = 1000


def _prepare(kernel, cfg, backend, args, common) -> tuple[Callable, float, Any, int]:
    """Jit the call on ``backend``; time its first call; run the warm-up calls;
    the number of settling calls ``common["settle_s"]`` takes (from the fastest
    warm-up call)."""
    import jax

    clock = common["clock"]
    fn = jax.jit(_caller(kernel, backend, cfg.kernel_kwargs))
    start = clock()
    output = _block(fn(*args))
    compile_s = clock() - start
    one = float("inf")
    for _ in range(max(common["n_warmup"], 1 if common["settle_s"] else 0)):
        t0 = time.perf_counter()
        _block(fn(*args))
        one = min(one, time.perf_counter() - t0)
    if common["rule"].adaptive:
        until = time.perf_counter() + ADAPTIVE_WARMUP_S
        while time.perf_counter() < until:
            _block(fn(*args))
    settle = min(MAX_SETTLE_CALLS, int(common["settle_s"] / max(one, 1e-7)))
    return (lambda: fn(*args)), compile_s, output, settle


def _settle(settle_s: Any) -> float:
    if isinstance(settle_s, bool) or not isinstance(settle_s, int | float):
        raise BenchmarkTypeError(
            f"benchmark: settle_s must be seconds, got {settle_s!r}."
        )
    if not 0 <= settle_s < 10:
        raise BenchmarkValueError(
            f"benchmark: settle_s must be >= 0 and < 10 seconds, got {settle_s!r}."
        )
    return float(settle_s)


def _caller(kernel: Any, backend: str, kw: dict[str, Any]) -> Callable[..., Any]:
    return lambda *a: kernel.call(*a, backend=backend, **kw)


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


def _failed(cfg: BenchmarkConfig, backend: str, err: BaseException) -> BenchmarkRecord:
    msg = f"{type(err).__name__}: {err}".strip()
    nan = math.nan  # what the reference records for a failed run
    return BenchmarkRecord("", backend, cfg.name, nan, nan, nan, None, False, msg)


def _verbose_line(name: str, rec: BenchmarkRecord) -> str:
    head = f"{name} [{rec.platform}] {rec.label} / {rec.backend}:"
    if not rec.success:
        return f"{head} FAILED: {rec.error}"
    noisy = f" (noisy: {rec.noise_note})" if rec.noisy else ""
    return (
        f"{head} median {rec.median_ms:.4g} ms, IQR {rec.iqr_ms:.3g} ms, "
        f"n={rec.n}, compile {rec.compile_ms:.4g} ms{noisy}"
    )


def _run_config(plan, cfg, device, common, catch_errors, verbose, progress):
    """Every backend of ``plan`` on one config: its records and outputs.

    Each backend is compiled and warmed up in turn; then all that compiled are
    timed together, interleaved (:func:`~.sampling.sample_interleaved`).
    """
    name, rule = plan.kernel.name, common["rule"]
    args = cfg.put_args(device).args
    calls, compile_s, outputs, failed, settle = {}, {}, {}, {}, {}
    for backend in plan.backends:
        if progress is not None:
            progress.advance(name, cfg.name, backend)
        try:
            prepared = _prepare(plan.kernel, cfg, backend, args, common)
            calls[backend], compile_s[backend], outputs[backend] = prepared[:3]
            settle[backend] = prepared[3]
        except Exception as err:
            if not catch_errors:
                raise
            failed[backend], outputs[backend] = _failed(cfg, backend, err), None
    sampled = sample_interleaved(
        calls,
        rule,
        n_batch_per_run=common["n_batch_per_run"],
        clock=common["clock"],
        block=_block,
        catch_errors=catch_errors,
        n_settle=settle,
        paired_base=pick_reference(list(calls), common["reference"]),
    )
    for backend, err in sampled.errors.items():
        failed[backend], outputs[backend] = _failed(cfg, backend, err), None
    records = []
    for backend in plan.backends:
        rec = failed.get(backend) or _record(
            cfg, backend, compile_s[backend], rule, sampled
        )
        rec.platform, rec.primitive = plan.platform, name
        rec.kernel_kwargs = dict(cfg.kernel_kwargs)
        rec.data_kwargs = dict(cfg.data_kwargs)
        rec.n_batch_per_run = common["n_batch_per_run"]
        if rec.success:  # the decision its lowering made: what ran, and why
            call = _caller(plan.kernel, backend, cfg.kernel_kwargs)
            launch = launch_of(plan.kernel, call, args, plan.platform)
            rec.launch_params, rec.launch_source = launch
        records.append(rec)
    # Each backend's time over the reference's, from every round (see .paired).
    base = pick_reference(list(sampled.times_s), common["reference"])
    pair_records(records, sampled.every_round, base)
    for rec in records if verbose else ():
        print(_verbose_line(name, rec), file=sys.stdout, flush=True)
    return records, outputs


def run_benchmark(
    kernel: Any,
    *,
    platform: str,
    n_warmup: int = 5,
    n_runs: int = 20,
    n_batch_per_run: int = 1,
    compare_results: bool = True,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    verbose: bool = False,
    catch_errors: bool = True,
    backends: Sequence[str] | str | None = None,
    reference_backend: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Any = None,
    plan: BenchmarkPlan | None = None,
    target_spread: float | None = None,
    time_budget_s: float = 2.0,
    max_runs: int | None = None,
    settle_s: float = 0.0,
) -> BenchmarkResult:
    """Benchmark every backend of ``kernel`` on ``platform`` over its configs.

    See ``XLACustomKernel.benchmark`` for the arguments shared with it. Extra ones:
    ``reference_backend`` (the oracle for output comparison; default ``jax_raw``
    when present, else the first successful backend), ``clock`` (seconds) and
    ``progress`` (a :class:`~polykernel.benchmark.progress.Progress`) and ``plan``
    (from :func:`plan_benchmark`; its configs and backends are used, and its steps
    are taken as already counted in ``progress``, so a caller running several
    primitives announces the total of the whole run once).

    How long each case is timed: the backends of a config are timed together,
    interleaved (one interval of each per round, in an order balanced over rounds),
    for ``n_runs`` rounds. With ``target_spread`` (a bound on IQR / median, e.g.
    ``0.05``) each backend is first warmed up for at least 0.2 s, and rounds go on
    until the last ``n_runs`` of them are steady — every backend within the bound —
    or ``time_budget_s`` seconds of rounds (at least three times the first
    ``n_runs`` rounds' time) are spent, or ``max_runs`` (default 10 000) rounds ran;
    the statistics are those of that window (when the bound was not reached, of the
    steadiest stretch of half the rounds: a burst of load elsewhere drops out), a
    record still above its bound is noisy (``record.noisy``, in words
    ``record.noise_note``) and ``record.n_sampled`` counts every round. Without it
    (the default, as the reference) exactly ``n_runs`` rounds run and noisy means
    IQR above 10 % of the median. ``record.stopped_by`` says which rule ended a
    case; ``record.paired_ratio`` is its time over the reference's timed in the same
    rounds, from the fast ends of both (``paired_spread`` its spread);
    ``record.launch_params`` and ``launch_source`` say which launch parameters ran
    and why. The result's ``environment`` holds
    the machine and the load the run met. With ``settle_s`` (e.g. ``SETTLE_S``,
    12 ms), each timed interval of a backend follows that many seconds of its own
    calls, untimed: it is timed as a loop calling it sees it (its threads awake,
    its data in cache), never while the previous backend's thread pool still spins
    on the cores, which on a small machine can double a time or halve it.

    Raises:
        BenchmarkDataFnNotProvidedError: no ``def_benchmark_data`` function.
        ValueError: no ``def_call`` function, or no backend for ``platform``, or a
            ``plan`` made for another kernel, platform or backends, or a bad
            ``target_spread``, ``time_budget_s`` or ``max_runs`` (each a
            ``BenchmarkValueError``).

    Example:
        >>> import jax, jax.numpy as jnp, polykernel as pk
        >>> from polykernel import BenchmarkConfig
        >>> op = pk.XLACustomKernel("doc.run_benchmark")
        >>> op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
        >>> op.def_call(lambda x, backend=None: op(
        ...     x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend))
        >>> op.def_benchmark_data(
        ...     lambda *, platform: [BenchmarkConfig("n=8", (jnp.ones(8),))])
        >>> result = op.benchmark(platform="cpu", n_runs=5)
        >>> [(r.label, r.backend, r.success) for r in result.records]
        [('n=8', 'jax_raw', True)]
    """
    name = kernel.name
    check_counts(n_warmup, n_runs, n_batch_per_run)
    rule = check_rule(n_runs, target_spread, time_budget_s, max_runs)
    if plan is None:
        plan = plan_benchmark(kernel, platform=platform, backends=backends)
        if progress is not None:
            progress.add_total(plan.steps)
    else:
        check_plan(plan, kernel, platform, backends)
    device = _device(platform)
    common = {"n_warmup": n_warmup, "rule": rule, "clock": clock}
    common |= {"n_batch_per_run": n_batch_per_run, "reference": reference_backend}
    common["settle_s"] = _settle(settle_s)
    load = LoadMonitor().start()
    records: list[BenchmarkRecord] = []
    for cfg in plan.configs:
        cfg_records, outputs = _run_config(
            plan, cfg, device, common, catch_errors, verbose, progress
        )
        if compare_results:
            check_outputs(
                cfg_records, outputs, cfg, name, rtol, atol, reference_backend
            )
        records.extend(cfg_records)
    environment = {"machine": machine_info(), "load": load.stop()}
    result = BenchmarkResult(records, primitive_name=name, environment=environment)
    measured = kernel_set(kernel, platform, plan.backends)
    if measured is not None:
        result.kernels[(name, platform)] = measured
    return result
