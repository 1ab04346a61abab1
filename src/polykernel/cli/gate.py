"""The regression gate of ``polykernel benchmark``: ``--compare OLD.json``,
``--fail-above RATIO`` and ``--relative-to BACKEND``.

The run's records are matched with an earlier results file's
(:mod:`polykernel.benchmark.regression`); a record slower than the bound beyond the
spread of both runs is timed again, and fails the gate only when that second run
finds it slower too.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from ._common import CliUsageError, failure, plural

__all__ = ["add_gate_args", "compare", "load_old"]


def add_gate_args(p: Any) -> None:
    """Add the gate's arguments to the ``benchmark`` parser ``p``."""
    p.add_argument(
        "--compare",
        metavar="OLD.json",
        help="print new/old per (primitive, backend, config) against an earlier "
        "results file",
    )
    p.add_argument(
        "--fail-above",
        type=float,
        default=None,
        metavar="RATIO",
        help="with --compare: exit 1 when a new/old ratio exceeds RATIO (e.g. 1.10) "
        "beyond the spread of both runs, in this run and in a second timing of "
        "the records found slower",
    )
    p.add_argument(
        "--relative-to",
        default="auto",
        metavar="BACKEND",
        help="with --compare: compare each time relative to BACKEND's in the same "
        "run and case, so a change of the machine's speed between the runs "
        "cancels (default auto: the reference, jax_raw, where both runs timed it; "
        "none: the times themselves)",
    )


def load_old(args: Any) -> Any:
    """The ``--compare`` file's records, read before anything runs."""
    from ..benchmark import BenchmarkResult

    if args.compare is None:
        if args.fail_above is not None:
            raise CliUsageError("--fail-above needs --compare OLD.json")
        if args.relative_to != "auto":
            raise CliUsageError("--relative-to needs --compare OLD.json")
        return None
    if args.fail_above is not None and not args.fail_above > 0:
        raise CliUsageError(f"--fail-above must be a ratio > 0, got {args.fail_above}")
    try:
        old = BenchmarkResult.load(args.compare)
    except (OSError, ValueError, TypeError) as err:
        raise CliUsageError(f"--compare {args.compare}: {failure(err)}") from err
    have = sorted({r.backend for r in old.records})
    if args.relative_to not in ("auto", "none", *have):
        raise CliUsageError(
            f"--relative-to {args.relative_to}: no record of {args.compare} has that "
            f"backend (it has: {', '.join(have) or 'none'}); or give auto or none"
        )
    return old


def compare(old: Any, result: Any, args: Any, again: Callable[[set[str]], Any]) -> int:
    """Print the comparison; the number of records slower than ``--fail-above``
    beyond the spread (or failing now).

    A record found slower is timed again (its primitive only) before it counts: a
    burst of load can push one run's ratio past the bound on identical code, and a
    gate that fails then gets switched off. It fails the gate only when the second
    run is slower beyond the spread too (``again``: a new result of the named
    primitives)."""
    from ..benchmark.regression import FAILED_NOW

    matched, unmatched = _matched(old, result, args)
    print()
    print(textwrap.fill(f"against {args.compare}{_loads(old, result)}:", 100))
    print(_formatted(matched, unmatched, args))
    if args.fail_above is None:
        return 0
    lost = sum(line.endswith(FAILED_NOW) for line in unmatched)
    slower = {c.key for c in matched if c.slower(args.fail_above)}
    if slower:
        names = {key[0] for key in slower}
        second = again(names)
        rematched, _ = _matched(old, second, args)
        confirmed = [c for c in rematched if c.key in slower]
        print()
        print(
            textwrap.fill(
                f"timed again to confirm ({plural(len(slower), 'record')} slower "
                f"than {args.fail_above:g}; a record fails only when both runs are "
                f"slower){_loads(old, second)}:",
                100,
            )
        )
        print(_formatted(confirmed, [], args))
        slower &= {c.key for c in confirmed if c.slower(args.fail_above)}
    return len(slower) + lost


def _matched(old: Any, result: Any, args: Any) -> tuple[list[Any], list[str]]:
    from ..benchmark.regression import AUTO, compare_records

    base = {"auto": AUTO, "none": None}.get(args.relative_to, args.relative_to)
    return compare_records(old.records, result.records, relative_to=base)


def _formatted(matched: list[Any], unmatched: list[str], args: Any) -> str:
    from ..benchmark.regression import format_comparison

    return format_comparison(matched, unmatched, args.fail_above)


def _loads(old: Any, new: Any) -> str:
    """The share of the CPUs other processes took during each run, when both files
    know it: a kernel using every core slows down with it, whatever the gate
    compares it with."""
    shares = [
        ((r.environment or {}).get("load") or {}).get("other_cpu_share")
        for r in (old, new)
    ]
    if any(not isinstance(s, int | float) for s in shares):
        return ""
    return (
        f" (other processes used {shares[0]:.0%} of the CPUs during its run, "
        f"{shares[1]:.0%} during this one)"
    )
