"""The main job behind ``make demo``: every catalog primitive, every backend, one table.

Run with ``python -m polykernel.demo [--output DIR] [--quick]``. For each primitive of
:mod:`polykernel.catalog` it benchmarks every backend usable on this machine on the
same data (outputs are compared across backends; a mismatch fails the demo), prints a
comparison table, measures ``scipy.sparse`` on the same CSR matrices side by side, and
writes ``results.json`` and ``results.png`` into the output directory, with
``machine.json`` beside them: what the numbers were measured on (:func:`machine_info`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform as _platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ._version import __version__, installed_version
from .benchmark import (
    BenchmarkConfig,
    BenchmarkResult,
    Progress,
    plan_benchmark,
    run_benchmark,
    time_function,
)


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
    for label, scipy_ms in scipy_rows:
        best = result.fastest(label)
        if best is None or best.median_ms is None:
            continue
        lines.append(
            f"  {label:<26} best={best.backend:<9} {best.median_ms:8.3f} ms   "
            f"scipy {scipy_ms:8.3f} ms   ratio {best.median_ms / scipy_ms:5.2f}x"
        )
    return "\n".join(lines)


def _cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (Linux), else :mod:`platform`'s."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return _platform.processor() or _platform.machine()


def machine_info() -> dict[str, Any]:
    """Describe the machine a benchmark runs on, as a JSON-ready dict.

    Returns:
        ``cpu`` (model name), ``cores`` (logical CPUs), ``os``, ``python``,
        ``versions`` (polykernel, jax, jaxlib, numpy, numba, scipy; None where not
        installed), ``gpus`` (the names of the GPUs JAX sees; empty on a CPU run)
        and ``date`` (UTC, ISO 8601).

    Example:
        >>> sorted(machine_info())
        ['cores', 'cpu', 'date', 'gpus', 'os', 'python', 'versions']
    """
    import jax

    dists = ("jax", "jaxlib", "numpy", "numba", "scipy")
    try:
        gpus = [d.device_kind for d in jax.devices("gpu")]
    except RuntimeError:
        gpus = []
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "os": f"{_platform.system()} {_platform.release()} ({_platform.machine()})",
        "python": _platform.python_version(),
        "versions": {"polykernel": __version__}
        | {d: installed_version(d) for d in dists},
        "gpus": gpus,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


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


def run(output: Path, n_warmup: int, n_runs: int) -> int:
    """Benchmark the catalog, print the tables and write the files; return exit code."""
    from . import catalog

    # Every plan first: the progress counter then runs against the whole total.
    # Each platform JAX has is benchmarked (the catalog's GPU kernels run where
    # `make demo-gpu` gives JAX a GPU); a primitive without kernels there is skipped.
    plans = {
        (p.name, platform): plan
        for platform in _platforms()
        for p in catalog.PRIMITIVES
        if (plan := _plan_or_none(p, platform)) is not None
    }
    results: dict[tuple[str, str], BenchmarkResult] = {}
    with Progress(stream=sys.stderr) as progress:
        progress.add_total(sum(plan.steps for plan in plans.values()))
        for key, plan in plans.items():
            results[key] = run_benchmark(
                plan.kernel,
                platform=key[1],
                n_warmup=n_warmup,
                n_runs=n_runs,
                progress=progress,
                plan=plan,
            )
    combined = BenchmarkResult.combine(results.values())
    for result in results.values():  # each table names its platform
        print(f"\n== {result.primitive_name} ==")
        print(result.table())  # the reference backend (jax_raw) is the baseline
    csrmv = (catalog.csrmv_p.name, "cpu")
    scipy_rows = _scipy_side_by_side(plans[csrmv].configs, n_warmup, n_runs)
    if scipy_rows:
        print()
        print(_scipy_report(results[csrmv], scipy_rows))
    output.mkdir(parents=True, exist_ok=True)
    json_path = combined.save(output / "results.json")
    png_path = combined.plot(output / "results.png", y="median_ms")
    machine_path = output / "machine.json"
    machine_path.write_text(json.dumps(machine_info(), indent=2) + "\n")
    print(f"\nwrote {json_path}, {png_path} and {machine_path}")
    problems = combined.mismatches + combined.failures
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
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
    args = parser.parse_args(argv)
    n_warmup, n_runs = (1, 3) if args.quick else (3, 15)
    return run(args.output, n_warmup, n_runs)


if __name__ == "__main__":
    raise SystemExit(main())
