"""``polykernel tune``: measure which backend and launch parameters are fastest.

::

    polykernel tune TARGET ...            tune the primitives of TARGET (and save)
    polykernel tune --report TARGET ...   what dispatch would pick for their data
    polykernel tune --show [NAME ...]     the entries, yours and shipped, fresh or stale
    polykernel tune --clear [NAME ...]    forget your entries (saved defaults too)
    polykernel tune --export FILE [NAME]  write your entries as a table to ship
    polykernel tune --merge A B ... -o OUT   one table from several (provenance kept)

A TARGET is a module or a ``.py`` file (imported from its path, :mod:`.targets`)
whose primitives are tuned — or ``MODULE:NAME``, one primitive, named in full
(``mylib.csrmv``) or by its last part (``csrmv``). Cases are each primitive's
benchmark data (``def_benchmark_data``), or ``--data MODULE:FUNCTION``'s
``BenchmarkConfig`` list (the shapes you name). Arguments are checked before
anything is measured. Exit codes as everywhere: 2 usage (a bad option value, a
backend no primitive has, a ``--data`` function that returns no list of configs),
1 failure (a primitive that cannot be tuned is reported and the others go on; a
table that cannot be written).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from ..benchmark.config import BenchmarkConfig
from ..core import registry
from ..dispatch import legacy, writing
from ..errors import TuningError
from ..platforms import PLATFORMS
from ._common import CliError, CliUsageError, csv_list, failure, plural, pos_int
from .tables import show_entries
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
        "--merge",
        nargs="+",
        metavar="TABLE",
        help="combine these tables into -o OUT (entries keep their provenance; "
        "conflicting winners are listed)",
    )
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
    p.add_argument("--max-seconds", type=_seconds, default=120.0, metavar="S")
    p.add_argument("--max-candidates", type=pos_int, default=None, metavar="N")
    p.add_argument(
        "--passes",
        type=pos_int,
        default=2,
        metavar="N",
        help="time every case N times, each pass after all the others (default: 2)",
    )
    p.add_argument(
        "--contention",
        action="store_true",
        help="time one more pass with the other cores busy; among candidates tied "
        "on the idle machine, prefer the one that holds up",
    )
    p.add_argument("--no-save", action="store_true", help="measure, do not record")
    p.add_argument("-o", "--output", metavar="OUT", help="the table --merge writes")
    p.add_argument(
        "--strict", action="store_true", help="--merge: exit 1 on conflicting winners"
    )
    job = p.add_argument_group(
        "a jax.distributed job (every process runs the same command; the cases "
        "are split and the same table saved on each)"
    )
    job.add_argument(
        "--distributed",
        action="store_true",
        help="join the job JAX detects (SLURM, Open MPI, ...) or the one the next "
        "three options name",
    )
    job.add_argument("--coordinator", metavar="HOST:PORT", help="process 0's address")
    job.add_argument("--num-processes", type=pos_int, metavar="N")
    job.add_argument("--process-id", type=int, metavar="I")
    p.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    p.set_defaults(handler=run)


def _seconds(text: str) -> float:
    """``argparse`` type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"expected a finite number of seconds > 0, got {text!r}"
        )
    return value


def run(args: Any) -> int:
    if args.show:
        show_entries(args.targets)
        return 0
    if args.clear:
        return clear(args.targets)
    if args.export:
        try:
            n = writing.export_entries(args.export, args.targets or None)
        except TuningError as err:
            raise CliError(str(err)) from err
        print(f"wrote {plural(n, 'entry', 'entries')} to {args.export}")
        return 0
    if args.merge:
        from .merge import merge

        return merge(args)
    if not args.targets:
        raise CliUsageError("give a TARGET (module, file.py or MODULE:NAME) to tune")
    _join_job(args)
    primitives = [p for t in args.targets for p in _primitives(t)]
    _check_backends(primitives, args.backends)
    data = _data_function(args.data) if args.data else None
    return (
        _report(primitives, args, data)
        if args.report
        else _tune(primitives, args, data)
    )


def _join_job(args: Any) -> None:
    """``jax.distributed.initialize`` with what the options give (before any JAX
    backend starts), so that ``tune()`` runs across the job."""
    named = (args.coordinator, args.num_processes, args.process_id)
    if not args.distributed and all(v is None for v in named):
        return
    if any(v is None for v in named) and any(v is not None for v in named):
        raise CliUsageError(
            "--coordinator, --num-processes and --process-id go together (or use "
            "--distributed alone for a job JAX detects)"
        )
    import jax

    try:
        if named[0] is None:
            jax.distributed.initialize()
        else:
            jax.distributed.initialize(
                args.coordinator, num_processes=args.num_processes,
                process_id=args.process_id,
            )  # fmt: skip
    except Exception as err:  # JAX's own errors: no job to join
        raise CliError(
            f"polykernel tune: cannot join the jax.distributed job "
            f"({type(err).__name__}: {str(err)[:200]})"
        ) from None


def clear(names: list[str], scope: Any = None) -> int:
    """Forget the user's entries (of ``names``, or all; of ``scope``, or every
    scope), and the old saved defaults of those primitives."""
    try:
        removed = writing.clear_entries(names or None, scope)
        removed = sorted({*removed, *legacy.clear_legacy(names or None)})
    except TuningError as err:
        raise CliError(str(err)) from err
    print(f"cleared {plural(len(removed), 'primitive')}: {', '.join(removed) or '-'}")
    return 0


def _check_backends(primitives: list[Any], backends: list[str] | None) -> None:
    if backends is None:
        return
    have = {b for op in primitives for p in PLATFORMS for b in op.available_backends(p)}
    unknown = [b for b in backends if b not in have]
    if unknown or not backends:
        raise CliUsageError(
            f"--backends {','.join(backends)}: {unknown or 'no backend'} not "
            f"registered by the primitives to tune (they have: {sorted(have)})"
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
            configs = _cases(data, platforms[0] if platforms else "cpu", args.data)
            report = op.tune(
                platform=platforms,
                configs=configs,
                backends=args.backends,
                max_seconds=args.max_seconds,
                max_candidates=args.max_candidates,
                passes=args.passes,
                contention=args.contention,
                save=not args.no_save,
            )
        except CliUsageError:
            raise
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


def _cases(data: Any, platform: str, text: str | None) -> list[Any] | None:
    """The ``--data`` function's cases for ``platform`` (None without ``--data``)."""
    if data is None:
        return None
    found = data(platform=platform)
    if (
        isinstance(found, BenchmarkConfig)
        or not isinstance(found, list | tuple)
        or not (found and all(isinstance(c, BenchmarkConfig) for c in found))
    ):
        raise CliUsageError(
            f"--data {text}: the function returned {type(found).__name__} "
            f"{found!r:.60}; it must return a non-empty list of BenchmarkConfig"
        )
    return list(found)


def _report(primitives: list[Any], args: Any, data: Any) -> int:
    from ..core.explain import explain_dispatch
    from ..dispatch import misses

    for op in primitives:
        for platform in args.platform or ["cpu"]:
            if data is None and op.benchmark_data_function is None:
                raise CliError(f"{op.name}: no benchmark data; pass --data")
            cases = _cases(data, platform, args.data) if data else None
            call = op.call if op.call_function is not None else op
            for cfg in cases or op.benchmark_data_function(platform=platform):
                for d in explain_dispatch(
                    call, *cfg.args, platform=platform, **cfg.kernel_kwargs
                ):
                    print(_fit(f"{cfg.label}: {d}"))
                    for entry, why in d.stale:
                        print(_fit(f"  stale entry ({_where(entry)}): {why}"))
    counted = misses()
    print(f"misses counted in this process: {plural(len(counted), 'key')}")
    for key, n in counted.items():
        bucket = "any" if key.bucket is None else list(key.bucket)
        print(_fit(f"  {key.primitive} {key.platform} bucket {bucket}: {n}"))
    return 0


def _where(entry: Any) -> str:
    bucket = entry.key.bucket
    return "any shape" if bucket is None else f"bucket {list(bucket)}"


def _fit(text: str) -> str:
    """``text`` wrapped within 100 columns, its continuation indented: a line cut
    at the edge lost the machine and the shape a decision was tuned on."""
    import textwrap

    wrap = textwrap.TextWrapper(
        100, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(wrap.wrap(text)) or text
