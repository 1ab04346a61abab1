"""``polykernel benchmark --processes N``: the same run timed in fresh processes too.

A process keeps states of its own for as long as it lives (``benchmark.processes``):
a spread measured within one cannot see them, and a gate's baseline written by one
process that fell in a fast state fails identical code later. With ``--processes
N``, after this process's run the same command runs in ``N - 1`` fresh processes, one
after the other (each a whole run: N times the time), each writing its records to a
file of a temporary folder (``--process-output``, not for users); the records of all
of them are joined (:func:`~polykernel.benchmark.processes.merge_processes`) before
anything is printed, saved or compared.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["PROCESSES", "in_processes", "processes_of"]

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
    ``args.processes - 1`` fresh processes; an error line for each process that
    wrote none."""
    from ..benchmark import BenchmarkResult
    from ..benchmark.processes import merge_processes

    results, errors = [result], []
    with tempfile.TemporaryDirectory(prefix="polykernel-processes-") as folder:
        for index in range(2, args.processes + 1):
            where = f"process {index} of {args.processes}"
            print(f"timing again in a fresh process: {where}", file=sys.stderr)
            out = Path(folder) / f"{index}.json"
            proc = subprocess.run(
                [sys.executable, "-m", "polykernel.cli", *args.argv, "--processes",
                 "1", "--no-progress", "--process-output", str(out)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if not out.exists():
                said = " ".join(proc.stderr.split())[-400:] or "nothing on stderr"
                errors.append(
                    f"{where} wrote no records (exit {proc.returncode}): {said}"
                )
                continue
            results.append(BenchmarkResult.load(out))
    return merge_processes(results), errors
