"""The main job behind ``make demo``: every catalog primitive, every backend, one table.

Run with ``python -m polykernel.demo [--output DIR] [--quick]``. For each primitive of
:mod:`polykernel.catalog` it benchmarks every backend usable on this machine on the
same data (outputs are compared across backends; a mismatch fails the demo), prints a
comparison table, measures ``scipy.sparse`` on the same CSR matrices side by side, and
writes ``results.json`` and ``results.png`` into the output directory, with
``machine.json`` beside them: what the numbers were measured on (:func:`machine_info`)
and the load they met. Last, it shows the backend and launch parameters dispatch
picks for a small and a large ``scaled_add`` (measured dispatch, ``docs/tuning.md``)
— the ones its table ran — and what tuning it again here measures (not saved, so
that the next run's table runs the same kernels).

Each table's headline is each backend's speed-up over ``jax_raw`` timed in the same
rounds (the backends of a case are timed interleaved, one call of each per round),
from the fast ends of both (``benchmark.paired``): a second run reproduces it,
where the times themselves move with the machine's load. Under each table: the
launch parameters each backend ran with, and why (tuned, default or given).

The whole run is timed in three processes, this one and two fresh ones in turn (as
``polykernel benchmark --processes 3``), and each number is the median of the three
(``benchmark.processes``): a process keeps states of its own for as long as it lives
— on a 2-core VM ``jax_raw``'s scatter over 10^7 nonzeros took 83 ms in one demo
process and 103 ms in the next, its kernels' times holding — so a ratio from one
process moved up to 49 % between two runs, the median of three up to 26 % (16, 14
and 5 of 34 ratios more than 10 % apart in three one-process pairs; 1, 8, 1, 4, 2
and 4 in six three-process pairs). In each process each case is timed in two passes over
that process's run (``run_benchmarks(passes=2)``), so a state of the machine that
outlasts a case is met by every case; in each pass until every backend's spread (IQR
/ median) is within 10 % and its ratio to ``jax_raw`` reads the same on both halves
of the pass, or the pass has had its share of the time budget (1 s of the case's 2
s, after at least 8 runs of each backend). A ratio whose spread — within a process,
or between the processes — is above the bound is reported noisy, in words, under its
table. The output starts with the machine and the load it ran under; every line of
it fits in 100 columns.

What more processes do not fix: a reference whose own speed depends on the host. On
that VM ``jax_raw``'s transposed ``csrmv`` 1000x1000 (a scatter, ~1 ms) runs at
0.63 ms for a few hundred milliseconds at a time and at 0.95 ms otherwise (fresh
input buffers at 40 addresses in one process: the fast state came in two consecutive
ones, so it is the machine's state, not the buffers' layout), and at 1.6 ms while
the VM's other core is busy, where Warp's kernel on the same data held its fastest
call at 0.17-0.18 ms. Thirteen fresh processes timing ``csrmv`` alone put its
1000x1000 ratios 24-58 % apart, and two medians of five processes would still be
over 10 % apart in 6-65 % of draws; its 20000x10000 ratios (references of 100 ms
and more) 8-26 % apart, two medians of three over 10 % apart in at most 6 % of
draws (Warp's transposed one: 33 %). The table's ``!`` marks such rows.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .benchmark import (
    BenchmarkConfig,
    BenchmarkResult,
    Progress,
    plan_benchmark,
    run_benchmarks,
    time_function,
)
from .benchmark.machine import LoadMonitor, environment_lines, machine_info
from .benchmark.table import TABLE_WIDTH, format_table

__all__ = ["Settings", "machine_info", "main", "render", "run"]


@dataclass(frozen=True)
class Settings:
    """How long the demo times each case (see the module docstring)."""

    n_warmup: int = 3
    n_runs: int = 15
    target_spread: float | None = 0.10
    time_budget_s: float = 2.0
    #: Untimed calls of a backend before each of its timed calls (``run_benchmark
    #: (settle_s=...)``): not timed while another backend's threads still spin.
    settle_s: float = 12e-3
    #: Each case is timed in this many passes over each process's run
    #: (``run_benchmarks(passes=...)``): it meets the states the machine goes
    #: through in that time, not only those of its own few seconds.
    passes: int = 2
    #: The whole run is timed in this many processes, this one and fresh ones in
    #: turn, and their records joined (the median of each number; a ratio's spread
    #: at least the processes' range): a process keeps states of its own.
    processes: int = 3


#: ``--quick``: a smoke test, a fixed few runs (noisier numbers), one per pass, in
#: this process only.
QUICK = Settings(
    n_warmup=1, n_runs=3, target_spread=None, time_budget_s=0.0, passes=3,
    processes=1,
)  # fmt: skip


def _scipy_side_by_side(
    configs: Sequence[BenchmarkConfig], n_warmup: int, n_runs: int
) -> list[tuple[str, float]]:
    """Median ms of ``scipy.sparse`` on the csrmv benchmark configs (same data)."""
    try:
        import scipy.sparse as sp
    except ImportError:
        return []
    rows = []
    for cfg in configs:
        data, indices, indptr, v = cfg.args
        matrix = sp.csr_matrix(
            (data, indices, indptr), shape=cfg.kernel_kwargs["shape"]
        )
        op = matrix.T if cfg.kernel_kwargs["transpose"] else matrix
        timing = time_function(
            lambda v, op=op: op @ v,
            (v,),
            n_warmup=n_warmup,
            n_runs=n_runs,
            block=lambda x: x,
        )
        times = sorted(timing.times_s)
        rows.append((cfg.name, 1e3 * times[len(times) // 2]))
    return rows


def _scipy_report(result: BenchmarkResult, scipy_rows: list[tuple[str, float]]) -> str:
    lines = [
        "csrmv vs scipy.sparse on the same matrix (median ms; ratio < 1 is faster):"
    ]
    width = max((len(label) for label, _ in scipy_rows), default=0)
    for label, scipy_ms in scipy_rows:
        best = result.fastest(label)
        if best is None or best.median_ms is None:
            continue
        lines.append(
            f"  {label:<{width}}  best={best.backend:<9} {best.median_ms:8.3f} ms  "
            f"scipy {scipy_ms:8.3f} ms  ratio {best.median_ms / scipy_ms:5.2f}x"
        )
    return "\n".join(lines)


def _plan_result(combined: BenchmarkResult, key: tuple[str, str]) -> BenchmarkResult:
    """The records of one plan (``(primitive, platform)``) of ``combined``."""
    records = [r for r in combined if (r.primitive, r.platform) == key]
    result = BenchmarkResult(records, key[0], combined.environment)
    result.kernels.update({k: v for k, v in combined.kernels.items() if k == key})
    return result


def _platforms() -> list[str]:
    """``cpu``, then ``gpu`` when JAX sees one."""
    import jax

    try:
        gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        gpu = False
    return ["cpu", "gpu"] if gpu else ["cpu"]


def _plan_or_none(primitive: Any, platform: str) -> Any:
    """The primitive's plan on ``platform``; None where it has no kernel there."""
    if platform != "cpu" and not primitive.available_backends(platform):
        return None
    return plan_benchmark(primitive, platform=platform)


def render(
    results: Sequence[BenchmarkResult],
    combined: BenchmarkResult,
    scipy_report: str = "",
    width: int = TABLE_WIDTH,
) -> str:
    """What the demo prints: the machine and load, one table per primitive and
    platform (speed-ups over ``jax_raw`` first), the scipy comparison; no line
    wider than ``width``."""
    parts = [environment_lines(combined.environment, width)]
    for result in results:  # each table names its platform
        parts.append(f"== {result.primitive_name} ==")
        # The reference backend (jax_raw) is the baseline.
        parts.append(format_table(result.records, width=width, speedup_first=True))
    if scipy_report:
        parts.append(scipy_report)
    return "\n\n".join(p for p in parts if p)


def tuned_dispatch(
    settings: Settings, width: int = TABLE_WIDTH, table: BenchmarkResult | None = None
) -> str:
    """What dispatch picks for ``scaled_add`` on a small and a large case, and why
    (the choice ``table``'s column of that backend ran too), then what tuning it
    again here measures (``op.tune(save=False)``: the table stays reproducible)."""
    import numpy as np

    from . import catalog
    from .core.explain import explain_dispatch

    op = catalog.scaled_add_p
    rng = np.random.default_rng(1)
    cases = [
        BenchmarkConfig(
            f"n={n:.0e}",
            (rng.random(n, np.float32), rng.random(n, np.float32)),
            {"alpha": 2.0},
        )
        for n in (1_000, 1_000_000)
    ]
    # --quick (a smoke test: no target spread) tunes in one short pass.
    quick = settings.target_spread is None
    report = op.tune(platform="cpu", configs=cases, case_seconds=0.3 if quick else 1.0,
                     passes=1 if quick else 2, save=False)  # fmt: skip
    lines = ["== dispatch: scaled_add (pk.explain_dispatch; op.tune(save=False)) =="]
    for case, tuned in zip(cases, report.cases, strict=True):
        (decision,) = explain_dispatch(
            catalog.scaled_add, *case.args, platform="cpu", **case.kernel_kwargs
        )
        picked = f"{decision.backend}{_params(decision.params)}"
        lines += _wrap(
            f"{case.label}: calls run {picked} [{decision.reason}]"
            f"{_as_in_table(table, op.name, case.label, decision)}",
            width,
        )
        lines += _wrap(_retuned(tuned, picked), width, indent="  ")
    return "\n".join(lines)


def _as_in_table(
    table: BenchmarkResult | None, primitive: str, label: str, decision: Any
) -> str:
    """Whether the table's column of ``decision.backend`` ran the same kernel."""
    ran = next(
        (
            r
            for r in (table.records if table is not None else ())
            if (r.primitive, r.platform, r.label, r.backend)
            == (primitive, "cpu", label, decision.backend)
        ),
        None,
    )
    if ran is None or not ran.success:
        return ""
    if dict(ran.launch_params) == dict(decision.params):
        return f", as its {decision.backend} column in the table above"
    ran_params = _params(ran.launch_params) or "no launch parameters"
    return f"; the table's {decision.backend} column ran {ran_params}"


def _retuned(tuned: Any, picked: str) -> str:
    """What tuning this case again measured, against the pick."""
    winner = tuned.winner
    if winner is None:
        return "tuning it again here timed nothing"
    mine = next(
        (m for m in tuned.measured if m.status == "ok" and m.candidate.label == picked),
        None,
    )
    text = f"tuning it again here (not saved): {winner.candidate.label} wins"
    if mine is None or mine is winner:
        return text + (", the same pick" if mine is winner else "")
    # Both relative to the case's fastest, round by round.
    return text + f"; {picked} takes {mine.ratio / winner.ratio:.2f}x its time"


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    import textwrap

    return textwrap.wrap(
        text, width, initial_indent=indent, subsequent_indent=indent + "  "
    )


def _params(params: Any) -> str:
    """``(parallel=True)``, as a tuning candidate's label writes it; ``""`` for
    none."""
    inner = ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
    return f"({inner})" if inner else ""


def run(
    output: Path, settings: Settings = Settings(), process_output: Path | None = None
) -> int:
    """Benchmark the catalog, print the tables and write the files; return exit code.
    With ``process_output``, this is one of the run's fresh processes: it times the
    catalog and writes its records there, nothing else."""
    from . import catalog
    from .cli.processes import rerun

    # Every plan first: the progress counter then runs against the whole total.
    # Each platform JAX has is benchmarked (the catalog's GPU kernels run where
    # `make demo-gpu` gives JAX a GPU); a primitive without kernels there is skipped.
    load = LoadMonitor().start()
    plans = {
        (p.name, platform): plan
        for platform in _platforms()
        for p in catalog.PRIMITIVES
        if (plan := _plan_or_none(p, platform)) is not None
    }
    with Progress(stream=sys.stderr) as progress:
        progress.add_total(sum(plan.steps for plan in plans.values()))
        timed = run_benchmarks(
            list(plans.values()),
            passes=settings.passes,
            n_warmup=settings.n_warmup,
            n_runs=settings.n_runs,
            target_spread=settings.target_spread,
            time_budget_s=settings.time_budget_s,
            settle_s=settings.settle_s,
            progress=None if process_output else progress,
        )
    combined = BenchmarkResult.combine(timed)
    combined.environment = {"machine": machine_info(), "load": load.stop()}
    if process_output is not None:
        combined.save(process_output)
        return 0
    lost: list[str] = []
    if settings.processes > 1:
        combined, lost = rerun(
            combined,
            settings.processes,
            lambda out: ["-m", "polykernel.demo", "--process-output", str(out),
                         "--settings", json.dumps(dataclasses.asdict(settings))],
        )  # fmt: skip
    results = {key: _plan_result(combined, key) for key in plans}
    csrmv = (catalog.csrmv_p.name, "cpu")
    scipy_rows = _scipy_side_by_side(
        plans[csrmv].configs, settings.n_warmup, settings.n_runs
    )
    environment = combined.environment or {}
    report = _scipy_report(results[csrmv], scipy_rows) if scipy_rows else ""
    print()
    print(render(list(results.values()), combined, report))
    print()
    print(tuned_dispatch(settings, table=combined))
    output.mkdir(parents=True, exist_ok=True)
    json_path = combined.save(output / "results.json")
    png_path = combined.plot(output / "results.png", y="median_ms")
    machine_path = output / "machine.json"
    machine = environment["machine"] | {"load": environment["load"]}
    machine_path.write_text(json.dumps(machine, indent=2) + "\n")
    names = f"{json_path.name}, {png_path.name} and {machine_path.name}"
    print(f"\nwrote {names} to\n  {output}")
    problems = combined.mismatches + combined.failures + lost
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    from .cli._common import pos_int

    assert __doc__ is not None  # this module's docstring
    parser = argparse.ArgumentParser(
        prog="python -m polykernel.demo", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--output",
        default="demo-output",
        type=Path,
        help="directory for results.json, results.png and machine.json",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer timed runs (a smoke test, noisier numbers)",
    )
    parser.add_argument(
        "--processes",
        type=pos_int,
        default=None,
        metavar="N",
        help=f"time the run in N processes, this one and N - 1 fresh ones in turn, "
        f"and show the median of their numbers (default {Settings.processes}; 1 "
        "with --quick)",
    )
    # One of the run's fresh processes: its records go to FILE, nothing else is
    # done; --settings: the run's Settings (JSON), so it times as the first did.
    parser.add_argument("--process-output", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--settings", type=json.loads, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.settings is not None:
        settings = Settings(**args.settings)
    else:
        settings = QUICK if args.quick else Settings()
    if args.processes is not None:
        settings = dataclasses.replace(settings, processes=args.processes)
    return run(args.output, settings, process_output=args.process_output)


if __name__ == "__main__":
    raise SystemExit(main())
