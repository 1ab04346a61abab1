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
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    BenchmarkDataFnNotProvidedError,
    BenchmarkMismatchWarning,
    BenchmarkTypeError,
    BenchmarkValueError,
)
from ..platforms import PLATFORMS
from .compare import compare_outputs, pick_reference
from .config import BenchmarkConfig
from .defaults import kernel_set
from .machine import LoadMonitor, machine_info
from .record import BenchmarkRecord, compute_stats
from .result import BenchmarkResult
from .sampling import Sampled, StopRule, check_rule, sample_interleaved
from .timing import check_counts

__all__ = ["BenchmarkPlan", "plan_benchmark", "run_benchmark"]


def _select_backends(kernel: Any, platform: str, backends: Any) -> list[str]:
    name = kernel.name
    available = list(kernel.available_backends(platform))
    if not available:
        registered = {p: list(kernel.available_backends(p)) for p in PLATFORMS}
        registered = {p: b for p, b in registered.items() if b}
        raise BenchmarkValueError(
            f"XLACustomKernel '{name}'.benchmark: no backend is registered for "
            f"platform '{platform}' (registered: {registered or 'none'}). Register "
            f"a kernel for '{platform}' or benchmark another platform."
        )
    if backends is None:
        return available
    wanted = [backends] if isinstance(backends, str) else list(backends)
    unknown = [b for b in wanted if b not in available]
    if unknown or not wanted:
        raise BenchmarkValueError(
            f"XLACustomKernel '{name}'.benchmark: backends={wanted!r} not all "
            f"registered for platform '{platform}' (registered: {available})."
        )
    return wanted


def _configs(kernel: Any, platform: str) -> list[BenchmarkConfig]:
    name = kernel.name
    returned = kernel.benchmark_data_function(platform=platform)
    try:
        configs = list(returned)
    except TypeError:
        raise BenchmarkTypeError(
            f"XLACustomKernel '{name}'.benchmark: the benchmark data function must "
            f"return a non-empty list of BenchmarkConfig, got "
            f"{type(returned).__name__}: {returned!r}."
        ) from None
    bad = [type(c).__name__ for c in configs if not isinstance(c, BenchmarkConfig)]
    if bad or not configs:
        got = f"items of type {sorted(set(bad))}" if bad else "an empty list"
        raise BenchmarkTypeError(
            f"XLACustomKernel '{name}'.benchmark: the benchmark data function must "
            f"return a non-empty list of BenchmarkConfig, got {got}."
        )
    return configs


def _device(platform: str) -> Any:
    import jax

    try:
        return jax.local_devices(backend=platform)[0]
    except RuntimeError as err:
        have = sorted({d.platform for d in jax.devices()})
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


def _prepare(kernel, cfg, backend, args, common) -> tuple[Callable, float, Any]:
    """Jit the call on ``backend``; time its first call; run the warm-up calls."""
    import jax

    kw, clock = cfg.kernel_kwargs, common["clock"]
    fn = jax.jit(lambda *a: kernel.call(*a, backend=backend, **kw))
    start = clock()
    output = _block(fn(*args))
    compile_s = clock() - start
    for _ in range(common["n_warmup"]):
        _block(fn(*args))
    if common["rule"].adaptive:
        until = time.perf_counter() + ADAPTIVE_WARMUP_S
        while time.perf_counter() < until:
            _block(fn(*args))
    return (lambda: fn(*args)), compile_s, output


def _record(cfg, backend, times_s, compile_s, rule: StopRule, sampled: Sampled):
    stats = compute_stats(times_s)
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


def _check_ready(kernel: Any) -> None:
    # The data function is checked first: when both are missing the reference
    # raises ValueError, and BenchmarkDataFnNotProvidedError is a ValueError too.
    name = kernel.name
    if kernel.benchmark_data_function is None:
        raise BenchmarkDataFnNotProvidedError(
            f"XLACustomKernel '{name}'.benchmark: no benchmark data function. "
            "Register one with def_benchmark_data(fn), where fn(*, platform) returns "
            "a list of BenchmarkConfig."
        )
    if kernel.call_function is None:
        raise BenchmarkValueError(
            f"XLACustomKernel '{name}'.benchmark: no call function. Register the "
            "user-facing wrapper with def_call(fn); it must accept backend=."
        )


@dataclass(frozen=True)
class BenchmarkPlan:
    """What one primitive's benchmark will run: its configs on its backends.

    Made before any timing so a caller benchmarking several primitives knows the
    number of steps of the whole run up front (for one progress total).
    """

    kernel: Any
    platform: str
    backends: tuple[str, ...]
    configs: tuple[BenchmarkConfig, ...]

    @property
    def steps(self) -> int:
        """Number of (config, backend) runs."""
        return len(self.configs) * len(self.backends)


def plan_benchmark(
    kernel: Any, *, platform: str, backends: Sequence[str] | str | None = None
) -> BenchmarkPlan:
    """Check ``kernel`` can be benchmarked and collect its configs and backends.

    Raises:
        ValueError: no ``def_call`` function, or no (or an unknown) backend.
        BenchmarkDataFnNotProvidedError: no ``def_benchmark_data`` function.
        TypeError: the data function returned something else than configs.
    """
    _check_ready(kernel)
    chosen = _select_backends(kernel, platform, backends)
    configs = _configs(kernel, platform)
    return BenchmarkPlan(kernel, platform, tuple(chosen), tuple(configs))


def _failed(cfg: BenchmarkConfig, backend: str, err: BaseException) -> BenchmarkRecord:
    msg = f"{type(err).__name__}: {err}".strip()
    nan = math.nan  # what the reference records for a failed run
    return BenchmarkRecord("", backend, cfg.name, nan, nan, nan, None, False, msg)


def _compare(records, outputs, cfg, name, rtol, atol, reference) -> None:
    ok = [r.backend for r in records if r.success]
    ref = pick_reference(ok, reference)
    if ref is None or len(ok) < 2:
        return
    for rec in records:
        if not rec.success:
            continue
        rec.reference_backend = ref
        if rec.backend == ref:
            continue
        cmp = compare_outputs(outputs[rec.backend], outputs[ref], rtol=rtol, atol=atol)
        rec.matches_reference, rec.max_abs_diff = cmp.matches, cmp.max_abs_diff
        if not cmp.matches:
            warnings.warn(
                f"benchmark of '{name}', config '{cfg.name}': backend "
                f"'{rec.backend}' disagrees with reference '{ref}' ({cmp.detail}; "
                f"rtol={rtol}, atol={atol}). The mismatch is recorded in "
                "BenchmarkResult.mismatches.",
                BenchmarkMismatchWarning,
                stacklevel=4,
            )


def _verbose_line(name: str, rec: BenchmarkRecord) -> str:
    head = f"{name} [{rec.platform}] {rec.label} / {rec.backend}:"
    if not rec.success:
        return f"{head} FAILED: {rec.error}"
    noisy = f" (noisy: {rec.noise_note})" if rec.noisy else ""
    return (
        f"{head} median {rec.median_ms:.4g} ms, IQR {rec.iqr_ms:.3g} ms, "
        f"n={rec.n}, compile {rec.compile_ms:.4g} ms{noisy}"
    )


def _check_plan(plan: BenchmarkPlan, kernel: Any, platform: str, backends) -> None:
    wanted = [backends] if isinstance(backends, str) else backends
    same_backends = wanted is None or tuple(wanted) == plan.backends
    if plan.kernel is not kernel or plan.platform != platform or not same_backends:
        raise BenchmarkValueError(
            f"run_benchmark of '{kernel.name}' on '{platform}': the plan was made "
            f"for '{plan.kernel.name}' on '{plan.platform}' with backends "
            f"{list(plan.backends)}; pass plan_benchmark(kernel, platform=...) of "
            "the same kernel, platform and backends."
        )


def _run_config(plan, cfg, device, common, catch_errors, verbose, progress):
    """Every backend of ``plan`` on one config: its records and outputs.

    Each backend is compiled and warmed up in turn; then all that compiled are
    timed together, interleaved (:func:`~.sampling.sample_interleaved`).
    """
    name, rule = plan.kernel.name, common["rule"]
    args = cfg.put_args(device).args
    calls, compile_s, outputs, failed = {}, {}, {}, {}
    for backend in plan.backends:
        if progress is not None:
            progress.advance(name, cfg.name, backend)
        try:
            calls[backend], compile_s[backend], outputs[backend] = _prepare(
                plan.kernel, cfg, backend, args, common
            )
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
    )
    for backend, err in sampled.errors.items():
        failed[backend], outputs[backend] = _failed(cfg, backend, err), None
    records = []
    for backend in plan.backends:
        rec = failed.get(backend) or _record(
            cfg,
            backend,
            sampled.times_s[backend],
            compile_s[backend],
            rule,
            sampled,
        )
        rec.platform, rec.primitive = plan.platform, name
        rec.kernel_kwargs = dict(cfg.kernel_kwargs)
        rec.data_kwargs = dict(cfg.data_kwargs)
        rec.n_batch_per_run = common["n_batch_per_run"]
        records.append(rec)
        if verbose:
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
    interleaved (one interval of each per round, in an order balanced over
    rounds), for
    ``n_runs`` rounds. With ``target_spread`` (a bound on IQR / median, e.g.
    ``0.05``) each backend is first warmed up for at least 0.2 s, and rounds go
    on until the last ``n_runs`` of them are steady — every
    backend within the bound — or ``time_budget_s`` seconds of rounds (at least
    three times the first ``n_runs`` rounds' time) are spent, or ``max_runs``
    (default 10 000) rounds ran; the statistics are those of that window (when
    the bound was not reached, of the steadiest stretch of half the rounds: a
    burst of load elsewhere drops out), a
    record still above its bound is noisy (``record.noisy``, in words
    ``record.noise_note``) and ``record.n_sampled`` counts every round. Without it
    (the default, as the reference) exactly ``n_runs`` rounds run and noisy means
    IQR above 10 % of the median. ``record.stopped_by`` says which rule ended a
    case. The result's ``environment`` holds the machine and the load the run met.

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
        _check_plan(plan, kernel, platform, backends)
    device = _device(platform)
    common = {"n_warmup": n_warmup, "rule": rule, "clock": clock}
    common["n_batch_per_run"] = n_batch_per_run
    load = LoadMonitor().start()
    records: list[BenchmarkRecord] = []
    for cfg in plan.configs:
        cfg_records, outputs = _run_config(
            plan, cfg, device, common, catch_errors, verbose, progress
        )
        if compare_results:
            _compare(cfg_records, outputs, cfg, name, rtol, atol, reference_backend)
        records.extend(cfg_records)
    environment = {"machine": machine_info(), "load": load.stop()}
    result = BenchmarkResult(records, primitive_name=name, environment=environment)
    measured = kernel_set(kernel, platform, plan.backends)
    if measured is not None:
        result.kernels[(name, platform)] = measured
    return result
