"""``polykernel benchmark``: time every backend of the selected primitives."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from ._common import (
    CliError,
    CliUsageError,
    check_writable,
    csv_list,
    failure,
    nonneg_int,
    plural,
    pos_int,
    suffixed,
)
from .gate import add_gate_args, compare, load_old
from .processes import PROCESSES, in_processes, processes_of
from .selection import add_selection_args, select

__all__ = ["cmd_benchmark", "register"]

# Each case is timed until every backend's spread (IQR / median) is within this
# bound, or its time budget (seconds beyond --n-runs) is spent.
TARGET_SPREAD = 0.10
TIME_BUDGET_S = 2.0
# Passes over the whole run each case is timed in (at most --n-runs), as
# `polykernel tune --passes` defaults to.
PASSES = 2
# The tuner's settling time (benchmark.runner.SETTLE_S), without importing the
# harness before a command runs.
SETTLE_S = 12e-3


def fraction(text: str) -> float:
    """``argparse`` type: a number >= 0 (0 turns the spread bound off)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(
            f"expected a fraction of the median >= 0 such as 0.05, got {text!r}"
        )
    return value


def seconds(text: str) -> float:
    """``argparse`` type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def register(sub: Any, common: Any) -> None:
    """Add the ``benchmark`` sub-command to ``sub``."""
    p = sub.add_parser(
        "benchmark", parents=[common], help="benchmark registered primitives"
    )
    add_selection_args(p)
    p.add_argument("--platform", default="cpu", choices=["cpu", "gpu", "tpu"])
    p.add_argument("--n-warmup", type=nonneg_int, default=5, metavar="N")
    p.add_argument(
        "--n-runs",
        type=pos_int,
        default=20,
        metavar="N",
        help="timed runs per backend and case: at least N, more while the spread "
        "is above --target-spread and the case's --time-budget lasts (default 20)",
    )
    p.add_argument(
        "--target-spread",
        type=fraction,
        default=TARGET_SPREAD,
        metavar="F",
        help="bound on each time's spread, IQR / median (default "
        f"{TARGET_SPREAD}); a time above it is reported noisy. 0: exactly N runs",
    )
    p.add_argument(
        "--time-budget",
        type=seconds,
        default=TIME_BUDGET_S,
        metavar="S",
        help="seconds a case may be timed beyond N runs to reach the bound "
        f"(default {TIME_BUDGET_S:g}; 0: none)",
    )
    p.add_argument(
        "--passes",
        type=pos_int,
        default=None,
        metavar="N",
        help="time every case in N passes, each after every other case's, so each "
        "meets the states the machine goes through during the whole run "
        f"(default {PASSES}, or 1 with --n-runs 1; at most --n-runs)",
    )
    p.add_argument(
        "--processes",
        type=pos_int,
        default=None,
        metavar="N",
        help="time the whole run in N processes, this one and N - 1 fresh ones in "
        "turn, and join their records, so each spread covers what differs from one "
        f"process to the next (default {PROCESSES} with --output or --compare, "
        "else 1)",
    )
    # One of those fresh processes: its records go to FILE, nothing else is done.
    p.add_argument("--process-output", metavar="FILE", help=argparse.SUPPRESS)
    p.add_argument("--n-batch-per-run", type=pos_int, default=1, metavar="N")
    p.add_argument(
        "--settle",
        type=seconds,
        default=SETTLE_S,
        metavar="S",
        help="seconds of a backend's own calls, untimed, before each of its timed "
        f"calls (default {SETTLE_S:g}: longer than the previous backend's threads "
        "spin; 0: none)",
    )
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3)
    p.add_argument(
        "--backends",
        type=csv_list,
        default=None,
        metavar="A,B",
        help="only these backends",
    )
    p.add_argument(
        "--output",
        "-o",
        type=suffixed(".json", ".csv"),
        metavar="FILE",
        help="save results (.json/.csv)",
    )
    p.add_argument(
        "--plot", type=suffixed(".png"), metavar="FILE.png", help="save a bar chart"
    )
    p.add_argument(
        "--save-defaults",
        action="store_true",
        help="persist the fastest correct backend per primitive",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if a backend fails or outputs disagree",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    add_gate_args(p)
    p.set_defaults(handler=cmd_benchmark)


def _runnable(chosen: dict[str, Any], platform: str) -> list[Any]:
    kernels, skipped = [], []
    for name, k in chosen.items():
        if k.call_function is None or k.benchmark_data_function is None:
            skipped.append(f"{name} (needs def_call and def_benchmark_data)")
        elif not k.available_backends(platform):
            skipped.append(f"{name} (no backend for {platform})")
        else:
            kernels.append(k)
    for line in skipped:
        print(f"polykernel benchmark: skipping {line}", file=sys.stderr)
    if not kernels:
        raise CliError(
            f"no registered primitive can be benchmarked on {platform} (matched "
            f"{len(chosen)}). Import primitives with --module MOD; each needs "
            "def_call, def_benchmark_data and a kernel for the platform."
        )
    return kernels


def _check_backends(kernels: list[Any], args: Any) -> None:
    registered = {b for k in kernels for b in k.available_backends(args.platform)}
    unknown = sorted(set(args.backends or ()) - registered)
    if unknown:
        raise CliUsageError(
            f"--backends {', '.join(unknown)}: not registered on {args.platform} by "
            f"any selected primitive (registered: {', '.join(sorted(registered))})."
        )


def _plan_all(kernels: list[Any], args: Any) -> tuple[list[Any], list[str]]:
    """Plan every primitive first, so the progress total is the whole run's."""
    from ..benchmark import plan_benchmark

    plans, errors = [], []
    for kernel in kernels:
        try:
            plans.append(
                plan_benchmark(kernel, platform=args.platform, backends=args.backends)
            )
        except (Exception, SystemExit) as err:  # sys.exit in its data: reported
            errors.append(f"{kernel.name}: {failure(err)}")
    return plans, errors


def _passes(args: Any) -> int:
    """``--passes``, checked against ``--n-runs`` (the default fits it)."""
    if args.passes is None:
        return min(PASSES, args.n_runs)
    if args.passes > args.n_runs:
        raise CliUsageError(
            f"--passes {args.passes}: at most --n-runs ({args.n_runs}), as each pass "
            "times a share of the runs; give fewer passes or more runs"
        )
    return args.passes


def _run_all(kernels: list[Any], args: Any) -> tuple[Any, list[str]]:
    from ..benchmark import BenchmarkResult, Progress, run_benchmarks
    from ..benchmark.machine import LoadMonitor, machine_info
    from ..errors import BenchmarkMismatchWarning

    load = LoadMonitor().start()
    plans, errors = _plan_all(kernels, args)
    progress = Progress(sys.stderr, tty=False if args.no_progress else None)
    progress.add_total(sum(plan.steps for plan in plans))

    def failed(plan: Any, err: BaseException) -> None:  # reported; the others go on
        errors.append(f"{plan.kernel.name}: {failure(err)}")

    with progress, warnings.catch_warnings():
        # Mismatches are recorded in the result and listed under the table.
        warnings.simplefilter("ignore", BenchmarkMismatchWarning)
        results = run_benchmarks(
            plans,
            passes=args.passes,
            on_error=failed,
            n_warmup=args.n_warmup,
            n_runs=args.n_runs,
            n_batch_per_run=args.n_batch_per_run,
            rtol=args.rtol,
            atol=args.atol,
            progress=None if args.no_progress else progress,
            target_spread=args.target_spread or None,
            time_budget_s=args.time_budget,
            settle_s=args.settle,
        )
    combined = BenchmarkResult.combine(results)
    combined.environment = {"machine": machine_info(), "load": load.stop()}
    return combined, errors


def cmd_benchmark(args: Any) -> int:
    """Handler of ``polykernel benchmark``."""
    from ..benchmark.machine import environment_lines

    child = args.process_output is not None  # one of several processes: time only
    for path, option in ((args.output, "--output"), (args.plot, "--plot")):
        if path and not child:
            check_writable(path, option)
    old = None if child else load_old(args)
    args.passes, args.processes = _passes(args), processes_of(args)
    kernels = _runnable(select(args), args.platform)
    _check_backends(kernels, args)
    result, errors = _run_all(kernels, args)
    if child:
        result.save(args.process_output)
        return 0
    if args.processes > 1:
        result, lost = in_processes(result, args)
        errors += lost
    # The machine and the load the numbers were measured on.
    print(environment_lines(result.environment))
    print()
    print(result.table())
    if args.output:
        print(f"saved results to {result.save(args.output)}")
    if args.plot and result.fastest() is not None:
        print(f"saved plot to {result.plot(args.plot, y='median_ms')}")
    if args.save_defaults:
        from ..dispatch.table import tuned_path
        from ..errors import TuningError

        try:
            saved = result.save_defaults()
        except TuningError as err:
            raise CliError(str(err)) from err
        for name, per in saved.items():
            chosen = ", ".join(f"{p}={b}" for p, b in per.items())
            print(f"default {name}: {chosen}")
        print(f"saved defaults to {tuned_path()}")
    n_fail, n_mis = len(result.failures), len(result.mismatches)
    print(
        f"{plural(len(kernels), 'primitive')}, {plural(len(result), 'run')}, "
        f"{n_fail} failed, {n_mis} mismatched, {len(result.noisy)} noisy"
    )
    slower = 0
    if old is not None:

        def again(names: set[str]) -> Any:  # the primitives of records found slower
            return _run_all([k for k in kernels if k.name in names], args)[0]

        slower = compare(old, result, args, again)
    for line in errors:
        print(f"polykernel benchmark: error: {' '.join(line.split())}", file=sys.stderr)
    if errors:
        return 1
    if slower:
        print(
            f"polykernel benchmark: error: --fail-above {args.fail_above}: "
            f"{plural(slower, 'record')} slower than that beyond the spread of both "
            f"runs (or failing now) against {args.compare}",
            file=sys.stderr,
        )
        return 1
    if args.strict and (n_fail or n_mis):
        print(
            f"polykernel benchmark: error: --strict: {plural(n_fail, 'failed run')}, "
            f"{plural(n_mis, 'output mismatch', 'output mismatches')}",
            file=sys.stderr,
        )
        return 1
    return 0
