"""``polykernel tune``: measure which backend and launch parameters are fastest.

::

    polykernel tune TARGET ...            tune the primitives of TARGET (and save)
    polykernel tune --report TARGET ...   what dispatch would pick for their data
    polykernel tune --show [NAME ...]     the tuned entries (yours and shipped)
    polykernel tune --clear [NAME ...]    forget your tuned entries
    polykernel tune --export FILE [NAME]  write your entries as a table to ship

A TARGET is a module or a ``.py`` file (imported from its path, :mod:`.targets`)
whose primitives are tuned — or ``MODULE:NAME``, one primitive, named in full
(``mylib.csrmv``) or by its last part (``csrmv``). Cases are each primitive's
benchmark data (``def_benchmark_data``), or ``--data MODULE:FUNCTION``'s
``BenchmarkConfig`` list (the shapes you name). Exit codes as everywhere: 2 usage,
1 failure (a primitive that cannot be tuned is reported and the others go on).
"""

from __future__ import annotations

import sys
from typing import Any

from ..core import registry
from ..platforms import PLATFORMS
from ..settings import tuned_table
from ._common import CliError, CliUsageError, csv_list, failure, plural, pos_int
from .targets import import_module, parse_target

__all__ = ["register"]


def register(sub: Any, common: Any) -> None:
    p = sub.add_parser(
        "tune",
        parents=[common],
        help="measure which backend and launch parameters are fastest",
        description="Measure which backend and launch parameters are fastest for "
        "each case of the primitives' benchmark data (or --data), save the winners "
        "to the tuned table, and manage that table.",
    )
    p.add_argument(
        "targets",
        nargs="*",
        metavar="TARGET",
        help="module, file.py or MODULE:NAME (or NAMEs for --show, --clear, --export)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--show", action="store_true", help="list tuned entries")
    mode.add_argument("--clear", action="store_true", help="forget your entries")
    mode.add_argument("--export", metavar="FILE", help="write your entries to FILE")
    mode.add_argument(
        "--report",
        action="store_true",
        help="what dispatch picks for the benchmark data, and why",
    )
    p.add_argument(
        "--platform",
        choices=PLATFORMS,
        action="append",
        help="only this platform (repeatable; default: all present)",
    )
    p.add_argument(
        "--data",
        metavar="MODULE:FUNCTION",
        help="cases from FUNCTION(platform=...) instead of benchmark data",
    )
    p.add_argument("--backends", type=csv_list, default=None, metavar="A,B")
    p.add_argument("--max-seconds", type=float, default=120.0, metavar="S")
    p.add_argument("--max-candidates", type=pos_int, default=None, metavar="N")
    p.add_argument(
        "--passes",
        type=pos_int,
        default=2,
        metavar="N",
        help="time every case N times, each pass after all the others (default: 2)",
    )
    p.add_argument("--no-save", action="store_true", help="measure, do not record")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    p.set_defaults(handler=run)


def run(args: Any) -> int:
    if args.show:
        return _show(args.targets)
    if args.clear:
        removed = tuned_table.clear_entries(args.targets or None)
        print(f"cleared {plural(len(removed), 'primitive')}: {', '.join(removed)}")
        return 0
    if args.export:
        n = tuned_table.export_entries(args.export, args.targets or None)
        print(f"wrote {plural(n, 'entry', 'entries')} to {args.export}")
        return 0
    if not args.targets:
        raise CliUsageError("give a TARGET (module, file.py or MODULE:NAME) to tune")
    primitives = [p for t in args.targets for p in _primitives(t)]
    data = _data_function(args.data) if args.data else None
    return (
        _report(primitives, args, data)
        if args.report
        else _tune(primitives, args, data)
    )


def _primitives(text: str) -> list[Any]:
    """The primitives ``text`` names: every one its module registers, or ``NAME``."""
    module_text, _, name = text.rpartition(":") if ":" in text else (text, "", "")
    before = set(registry.get_all_primitive_names())
    module = import_module(parse_target(module_text, "tune"))
    names = registry.get_all_primitive_names()
    if name:  # in full or by its last part
        mine = [n for n in names if name in (n, n.rsplit(".", 1)[-1])]
        if not mine:
            raise CliUsageError(f"target {text!r}: no primitive named {name!r}")
    else:  # registered by the import, or (imported before) defined in the module
        mine = [n for n in names if n not in before or _defined_in(n, module)]
        if not mine:
            raise CliUsageError(f"target {text!r}: defines no primitive")
    return [registry.get_primitive(n) for n in mine]


def _defined_in(name: str, module: Any) -> bool:
    return any(getattr(v, "name", None) == name for v in vars(module).values())


def _data_function(text: str) -> Any:
    """``--data MODULE:FUNCTION`` (a module name or a ``.py`` file, as targets are)."""
    target = parse_target(text, "--data", functions=True)
    if target.function is None:
        raise CliUsageError(f"--data {text!r}: give MODULE:FUNCTION")
    fn = getattr(import_module(target), target.function, None)
    if not callable(fn):
        raise CliUsageError(f"--data {text!r}: no function {target.function!r}")
    return fn


def _tune(primitives: list[Any], args: Any, data: Any) -> int:
    failed = []
    reports = []
    for op in primitives:
        try:
            platforms = args.platform
            configs = (
                data(platform=platforms[0] if platforms else "cpu") if data else None
            )
            report = op.tune(
                platform=platforms,
                configs=configs,
                backends=args.backends,
                max_seconds=args.max_seconds,
                max_candidates=args.max_candidates,
                passes=args.passes,
                save=not args.no_save,
            )
        except (Exception, SystemExit) as err:  # reported; the others go on
            failed.append(f"{op.name}: {failure(err)}")
            print(f"{op.name}: FAILED ({failure(err)})")
            continue
        reports.append(report)
        print(report.table())
    if args.json:
        import json

        with open(args.json, "w") as fh:
            json.dump([r.to_json() for r in reports], fh, indent=2)
    for line in failed:
        print(f"polykernel tune: error: {line}", file=sys.stderr)
    return 1 if failed else 0


def _report(primitives: list[Any], args: Any, data: Any) -> int:
    from ..core.dispatch import misses
    from ..core.explain import explain_dispatch

    for op in primitives:
        for platform in args.platform or ["cpu"]:
            fn = data or op.benchmark_data_function
            if fn is None:
                raise CliError(f"{op.name}: no benchmark data; pass --data")
            call = op.call if op.call_function is not None else op
            for cfg in fn(platform=platform):
                for d in explain_dispatch(
                    call, *cfg.args, platform=platform, **cfg.kernel_kwargs
                ):
                    print(_fit(f"{cfg.label}: {d}"))
    counted = misses()
    print(f"misses counted in this process: {plural(len(counted), 'key')}")
    for key, n in counted.items():
        print(_fit(f"  {key.primitive} {key.platform} bucket {list(key.bucket)}: {n}"))
    return 0


def _show(names: list[str]) -> int:
    wanted = names or tuned_table.user_primitives()
    print(f"your tuned table: {tuned_table.tuned_path()}")
    shown = 0
    for name in wanted:
        for entry in tuned_table.entries_for(name):
            shown += 1
            best = entry.best
            params = ", ".join(f"{k}={v!r}" for k, v in best.params)
            print(
                _fit(
                    f"{name} {entry.key.platform} bucket {list(entry.key.bucket)}: "
                    f"{best.backend}({params}) {best.median_s * 1e3:.4f} ms"
                )
            )
    print(plural(shown, "entry", "entries"))
    return 0


def _fit(text: str) -> str:
    return text if len(text) <= 100 else text[:99] + "…"
