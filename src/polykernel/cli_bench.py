"""``polykernel list`` and ``polykernel benchmark``: primitives from the registry.

Primitives register themselves when their module is imported, so both commands
first import ``polykernel.catalog`` (the bundled demo set, when present) and every
``--module`` given (a dotted module name or a path to a ``.py`` file).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import warnings
from pathlib import Path
from typing import Any

from . import registry
from .cli import CliError

__all__ = ["add_selection_args", "cmd_benchmark", "cmd_list", "import_modules"]

CATALOG = "polykernel.catalog"


def add_selection_args(p: Any) -> None:
    """Add the arguments that choose which primitives a command sees."""
    p.add_argument("names", nargs="*", metavar="NAME", help="only these primitives")
    p.add_argument(
        "--tags",
        default="",
        metavar="A,B",
        help="only primitives carrying all these tags",
    )
    p.add_argument(
        "--module",
        "-m",
        action="append",
        default=[],
        metavar="MOD",
        help="import this module (or .py file) first; repeatable",
    )
    p.add_argument("--no-catalog", action="store_true", help=f"do not import {CATALOG}")


def _import_file(path: Path) -> None:
    name = f"_polykernel_cli_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def import_modules(modules: list[str], catalog: bool = True) -> None:
    """Import the catalog (if installed and wanted) and each of ``modules``.

    Raises:
        CliError: a module cannot be imported (names it and the cause).
    """
    wanted = list(modules)
    if catalog and importlib.util.find_spec(CATALOG) is not None:
        wanted.insert(0, CATALOG)
    for mod in wanted:
        try:
            path = Path(mod)
            if mod.endswith(".py"):
                if not path.is_file():
                    raise ImportError(f"no such file: {path}")
                _import_file(path)
            else:
                importlib.import_module(mod)
        except Exception as err:
            raise CliError(
                f"cannot import module {mod!r} ({type(err).__name__}: {err}). "
                "Check the name and that it is importable (PYTHONPATH)."
            ) from err


def _select(args: Any) -> dict[str, Any]:
    import_modules(args.module, catalog=not args.no_catalog)
    tags = {t.strip() for t in args.tags.split(",") if t.strip()}
    chosen = registry.get_primitives_by_tags(tags)
    for name in args.names:
        registry.get_primitive(name)  # KeyError naming close matches
    if args.names:
        chosen = {n: k for n, k in chosen.items() if n in args.names}
    return chosen


def _describe(kernel: Any) -> dict[str, Any]:
    backends = {p: kernel.available_backends(p) for p in ("cpu", "gpu", "tpu")}
    return {
        "name": kernel.name,
        "tags": list(kernel.tags),
        "backends": {p: b for p, b in backends.items() if b},
        "defaults": {p: kernel.get_default(p) for p, b in backends.items() if b},
        "benchmarkable": kernel.call_function is not None
        and kernel.benchmark_data_function is not None,
    }


def cmd_list(args: Any) -> int:
    """Handler of ``polykernel list``."""
    rows = [_describe(k) for k in _select(args).values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no registered primitives match (import their module with --module)")
        return 0
    for row in rows:
        backends = "; ".join(
            f"{p}: {', '.join(b)} (default {row['defaults'][p]})"
            for p, b in row["backends"].items()
        )
        tags = ",".join(row["tags"]) or "-"
        bench = "benchmarkable" if row["benchmarkable"] else "no benchmark data"
        print(f"{row['name']}  [tags: {tags}]  {backends or 'no kernels'}  ({bench})")
    return 0


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


def _run_all(kernels: list[Any], args: Any) -> tuple[Any, list[str]]:
    from .benchmark import BenchmarkResult, Progress, run_benchmark
    from .errors import BenchmarkMismatchWarning

    results, errors = [], []
    progress = Progress(sys.stderr, tty=False if args.no_progress else None)
    with progress, warnings.catch_warnings():
        # Mismatches are recorded in the result and listed under the table.
        warnings.simplefilter("ignore", BenchmarkMismatchWarning)
        for kernel in kernels:
            try:
                results.append(
                    run_benchmark(
                        kernel,
                        platform=args.platform,
                        n_warmup=args.n_warmup,
                        n_runs=args.n_runs,
                        n_batch_per_run=args.n_batch_per_run,
                        rtol=args.rtol,
                        atol=args.atol,
                        backends=args.backends,
                        progress=None if args.no_progress else progress,
                    )
                )
            except Exception as err:
                errors.append(f"{kernel.name}: {type(err).__name__}: {err}")
    return BenchmarkResult.combine(results), errors


def cmd_benchmark(args: Any) -> int:
    """Handler of ``polykernel benchmark``."""
    kernels = _runnable(_select(args), args.platform)
    result, errors = _run_all(kernels, args)
    print(result.table())
    if args.output:
        print(f"saved results to {result.save(args.output)}")
    if args.plot and result.fastest() is not None:
        print(f"saved plot to {result.plot(args.plot)}")
    if args.save_defaults:
        from .tuned_defaults import defaults_path

        for name, per in result.save_defaults().items():
            chosen = ", ".join(f"{p}={b}" for p, b in per.items())
            print(f"default {name}: {chosen}")
        print(f"saved defaults to {defaults_path()}")
    n_fail, n_mis = len(result.failures), len(result.mismatches)
    print(
        f"{len(kernels)} primitives, {len(result)} runs, {n_fail} failed, "
        f"{n_mis} mismatched, {len(result.noisy)} noisy"
    )
    for line in errors:
        print(f"polykernel benchmark: error: {' '.join(line.split())}", file=sys.stderr)
    if errors:
        return 1
    if args.strict and (n_fail or n_mis):
        print(
            f"polykernel benchmark: error: --strict: {n_fail} failed runs, "
            f"{n_mis} output mismatches",
            file=sys.stderr,
        )
        return 1
    return 0
