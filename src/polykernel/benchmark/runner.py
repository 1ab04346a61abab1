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

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import BenchmarkTypeError, BenchmarkValueError
from .case import Case, CaseOptions, finish_case, prepare_case, time_pass
from .compare import check_outputs
from .defaults import kernel_set
from .machine import LoadMonitor, machine_info
from .passes import pass_rule
from .plan import BenchmarkPlan, check_plan, plan_benchmark
from .record import BenchmarkRecord
from .result import BenchmarkResult
from .sampling import check_rule
from .timing import check_counts

__all__ = ["BenchmarkPlan", "plan_benchmark", "run_benchmark", "run_benchmarks"]


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


#: ``settle_s`` of ``polykernel benchmark`` and the demo: longer than a thread pool
#: spins after its last parallel region (an OpenMP pool about 8 ms after a Numba
#: ``parallel=True`` kernel here, XLA's about 2 ms), as the tuner settles.
SETTLE_S = 12e-3


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


def _passes(passes: Any, n_runs: int) -> int:
    if isinstance(passes, bool) or not isinstance(passes, int):
        raise BenchmarkTypeError(
            f"benchmark: passes must be a whole number, got {passes!r}."
        )
    if not 1 <= passes <= n_runs:
        raise BenchmarkValueError(
            f"benchmark: passes must be at least 1 and at most n_runs ({n_runs}): "
            f"each pass times a share of the runs; got {passes!r}."
        )
    return passes


def _options(
    n_warmup, n_runs, n_batch_per_run, clock, target_spread, time_budget_s,
    max_runs, settle_s, reference_backend, catch_errors, passes,
) -> tuple[CaseOptions, int]:  # fmt: skip
    """The arguments every case is timed with, checked once, and the passes."""
    check_counts(n_warmup, n_runs, n_batch_per_run)
    rule = check_rule(n_runs, target_spread, time_budget_s, max_runs)
    passes = _passes(passes, n_runs)
    options = CaseOptions(
        rule, n_warmup, n_batch_per_run, clock, _settle(settle_s), reference_backend,
        catch_errors,
    )  # fmt: skip
    return options, passes


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
    passes: int = 1,
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
    # Checked before the data is made.
    options, passes = _options(
        n_warmup, n_runs, n_batch_per_run, clock, target_spread, time_budget_s,
        max_runs, settle_s, reference_backend, catch_errors, passes,
    )  # fmt: skip
    if plan is None:
        plan = plan_benchmark(kernel, platform=platform, backends=backends)
        if progress is not None:
            progress.add_total(plan.steps)
    else:
        check_plan(plan, kernel, platform, backends)
    checks = (rtol, atol) if compare_results else None
    (result,) = _Run(options, passes, progress, None, checks, verbose).all([plan])
    return result


def run_benchmarks(
    plans: Sequence[BenchmarkPlan],
    *,
    passes: int = 1,
    on_error: Callable[[BenchmarkPlan, BaseException], None] | None = None,
    n_warmup: int = 5,
    n_runs: int = 20,
    n_batch_per_run: int = 1,
    compare_results: bool = True,
    rtol: float = 1e-3,
    atol: float = 1e-3,
    verbose: bool = False,
    catch_errors: bool = True,
    reference_backend: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    progress: Any = None,
    target_spread: float | None = None,
    time_budget_s: float = 2.0,
    max_runs: int | None = None,
    settle_s: float = 0.0,
) -> list[BenchmarkResult]:
    """Benchmark several plans (:func:`plan_benchmark`) in one run, each case in
    ``passes`` passes spread over the whole run: one result per plan, in order.

    With one pass, each plan runs as :func:`run_benchmark` runs it. With more,
    every case of every plan is compiled and warmed up first, then each pass times
    every case in turn (with ``n_runs / passes`` rounds at least, and
    ``time_budget_s / passes`` of budget), and the records come from all of a
    case's passes: its per-call statistics from each pass's window, its
    ``paired_ratio`` from the fast ends over every round. A machine's speed moves in
    states that can last tens of seconds (one case at a time would be timed within
    one of them, and a second run, meeting another, reads another ratio); passes
    apart in time meet the states of the whole run, and the fast ends read the
    fastest of them. Every case's data and compiled calls are held until the last
    pass. ``progress`` counts one more step per case and pass.

    ``on_error`` (``None``: raise) is called with a plan and the error that ended
    it (its data, its device or its reference raising; a backend that raises is a
    failed record, as ever): the other plans go on, and that plan has no result.
    The other arguments are :func:`run_benchmark`'s.

    Raises:
        ValueError: ``passes`` below 1 or above ``n_runs`` (a
            ``BenchmarkValueError``), or any of :func:`run_benchmark`'s.

    Example:
        >>> import jax, jax.numpy as jnp, polykernel as pk
        >>> from polykernel import BenchmarkConfig
        >>> from polykernel.benchmark import plan_benchmark, run_benchmarks
        >>> op = pk.XLACustomKernel("doc.run_benchmarks")
        >>> op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
        >>> op.def_call(lambda x, backend=None: op(
        ...     x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend))
        >>> op.def_benchmark_data(
        ...     lambda *, platform: [BenchmarkConfig("n=8", (jnp.ones(8),))])
        >>> plan = plan_benchmark(op, platform="cpu")
        >>> (result,) = run_benchmarks([plan], passes=3, n_runs=6)
        >>> [(r.backend, r.passes, r.n) for r in result.records]
        [('jax_raw', 3, 6)]
    """
    options, passes = _options(
        n_warmup, n_runs, n_batch_per_run, clock, target_spread, time_budget_s,
        max_runs, settle_s, reference_backend, catch_errors, passes,
    )  # fmt: skip
    checks = (rtol, atol) if compare_results else None
    run = _Run(options, passes, progress, on_error, checks, verbose)
    return run.all(list(plans))


@dataclass
class _PlanRun:
    """One plan while a run goes on: the cases waiting for their next pass, the
    records so far, the load monitor, its result once finished, or the error that
    ended it."""

    plan: BenchmarkPlan
    load: LoadMonitor | None = None
    cases: list[Case] = field(default_factory=list)
    records: list[BenchmarkRecord] = field(default_factory=list)
    result: BenchmarkResult | None = None
    error: BaseException | None = None


@dataclass
class _Run:
    """Several plans timed together (:func:`run_benchmarks`): ``checks`` the
    output tolerances ``(rtol, atol)``, ``None`` to compare nothing."""

    options: CaseOptions
    passes: int
    progress: Any
    on_error: Callable[[BenchmarkPlan, BaseException], None] | None
    checks: tuple[float, float] | None
    verbose: bool

    def all(self, plans: list[BenchmarkPlan]) -> list[BenchmarkResult]:
        """Every case of ``plans``: one after the other with one pass; with more,
        all prepared, then timed pass by pass, then finished."""
        runs = [_PlanRun(plan) for plan in plans]
        passes, progress = self.passes, self.progress
        if passes > 1 and progress is not None:
            progress.add_total(passes * sum(len(plan.configs) for plan in plans))
        for run in runs:
            with self._guarded(run):
                self._prepare(run)
        for index in range(passes if passes > 1 else 0):
            rule = pass_rule(self.options.rule, passes, index)
            for run, case in [(r, c) for r in runs for c in r.cases]:
                if run.error is not None:
                    continue
                if progress is not None:
                    label = f"pass {index + 1}/{passes}"
                    progress.advance(run.plan.kernel.name, case.cfg.name, label)
                with self._guarded(run):
                    time_pass(case, rule, self.options)
        for run in runs if passes > 1 else ():
            if run.error is None:
                with self._guarded(run):
                    for case in run.cases:
                        self._finish(run, case)
                    run.result = _result(run)
            run.cases.clear()
        return [run.result for run in runs if run.result is not None]

    def _prepare(self, run: _PlanRun) -> None:
        """Prepare every case of ``run``; with one pass, time and finish each at
        once (its data let go before the next is made, as it always was)."""
        run.load = LoadMonitor().start()
        device = _device(run.plan.platform)
        for cfg in run.plan.configs:
            case = prepare_case(run.plan, cfg, device, self.options, self.progress)
            if self.passes > 1:
                run.cases.append(case)
                continue
            time_pass(case, self.options.rule, self.options)
            self._finish(run, case)
        if self.passes == 1:
            run.result = _result(run)

    def _finish(self, run: _PlanRun, case: Case) -> None:
        """``case``'s records (outputs checked) added to ``run``'s."""
        records, outputs = finish_case(case, self.options, self.verbose)
        if self.checks is not None:
            rtol, atol = self.checks
            name, reference = run.plan.kernel.name, self.options.reference_backend
            check_outputs(records, outputs, case.cfg, name, rtol, atol, reference)
        run.records.extend(records)

    @contextlib.contextmanager
    def _guarded(self, run: _PlanRun) -> Iterator[None]:
        """Run the block for ``run``; an error ends that plan only, when
        ``on_error`` takes it."""
        try:
            yield
        except (Exception, SystemExit) as err:  # sys.exit in a user's call
            if self.on_error is None:
                raise
            run.error = err
            self.on_error(run.plan, err)


def _result(run: _PlanRun) -> BenchmarkResult:
    plan = run.plan
    assert run.load is not None
    environment = {"machine": machine_info(), "load": run.load.stop()}
    name = plan.kernel.name
    result = BenchmarkResult(run.records, primitive_name=name, environment=environment)
    measured = kernel_set(plan.kernel, plan.platform, plan.backends)
    if measured is not None:
        result.kernels[(name, plan.platform)] = measured
    return result
