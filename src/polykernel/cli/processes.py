"""``polykernel benchmark --processes N``: the same run timed in fresh processes too.

A process keeps states of its own for as long as it lives (``benchmark.processes``):
a spread measured within one cannot see them, and a gate's baseline written by one
process that fell in a fast state fails identical code later. With ``--processes
N``, after this process's run the same command runs in ``N - 1`` fresh processes, one
after the other (each a whole run: N times the time), each writing its records to a
file of a temporary folder (``--process-output``, not for users); the records of all
of them are joined (:func:`~polykernel.benchmark.processes.merge_processes`) before
anything is printed, saved or compared. The demo times its run the same way
(:func:`rerun`, ``python -m polykernel.demo``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["PROCESSES", "in_processes", "processes_of", "rerun", "time_limit"]

#: ``--processes`` where the run writes or compares a results file (a gate's
#: baseline and its check): two, as asv times each benchmark by default.
PROCESSES = 2


def processes_of(args: Any) -> int:
    """``--processes``, or its default: :data:`PROCESSES` with ``--output`` or
    ``--compare``, else 1."""
    if args.processes is not None:
        return args.processes
    return PROCESSES if (args.output or args.compare) else 1


def in_processes(result: Any, args: Any) -> tuple[Any, list[str]]:
    """``result`` joined with the same command's records from
    ``args.processes - 1`` fresh processes (:func:`rerun`)."""
    return rerun(
        result,
        args.processes,
        lambda out: ["-m", "polykernel.cli", *args.argv, "--processes", "1",
                     "--no-progress", "--process-output", str(out)],
    )  # fmt: skip


def rerun(
    result: Any, processes: int, command: Callable[[Path], list[str]]
) -> tuple[Any, list[str]]:
    """``result`` joined with the records of ``processes - 1`` fresh Pythons, one
    after the other, each run with the arguments ``command(FILE)`` and writing its
    records to ``FILE``; an error line for each process that wrote none, or did not
    finish within :func:`time_limit` (it is stopped)."""
    from ..benchmark import BenchmarkResult
    from ..benchmark.processes import merge_processes

    results, errors = [result], []
    limit = time_limit(result)
    with tempfile.TemporaryDirectory(prefix="polykernel-processes-") as folder:
        for index in range(2, processes + 1):
            where = f"process {index} of {processes}"
            print(f"timing again in a fresh process: {where}", file=sys.stderr)
            out = Path(folder) / f"{index}.json"
            try:
                proc = subprocess.run(
                    [sys.executable, *command(out)],
                    capture_output=True, text=True, check=False, timeout=limit,
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                errors.append(
                    f"{where} did not finish within {limit:.0f} s (this process's "
                    f"run took {_seconds(result):.0f} s) and was stopped"
                )
                continue
            if not out.exists():
                said = " ".join(proc.stderr.split())[-400:] or "nothing on stderr"
                errors.append(
                    f"{where} wrote no records (exit {proc.returncode}): {said}"
                )
                continue
            results.append(BenchmarkResult.load(out))
    return merge_processes(results), errors


#: A fresh process may take this long at least (imports and compiles from cold)...
MIN_TIME_LIMIT_S = 300.0
#: ... or this many times what this process's run took.
TIME_LIMIT_FACTOR = 5.0


def time_limit(result: Any) -> float:
    """Seconds a fresh process gets before it is stopped: a hang must not hang the
    command (:data:`MIN_TIME_LIMIT_S`, or :data:`TIME_LIMIT_FACTOR` times this
    process's run where that is longer)."""
    return max(MIN_TIME_LIMIT_S, TIME_LIMIT_FACTOR * _seconds(result))


def _seconds(result: Any) -> float:
    load = (result.environment or {}).get("load") or {}
    seconds = load.get("seconds")
    return float(seconds) if isinstance(seconds, int | float) else 0.0
