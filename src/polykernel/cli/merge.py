"""``polykernel tune --merge A.json B.json ... -o OUT``: one table from many.

Tables tuned on several machines (or by several jobs) are combined by
:func:`polykernel.dispatch.merge.merge_tables`: every entry keeps its provenance,
a case answered by several files takes the first file's entry, and the others
are kept in the output (never lost). Cases whose files chose different winners
for the same device kind are listed; ``--strict`` makes them an error (exit 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..dispatch.files import FileProblem, locked, write_json
from ..dispatch.merge import merge_tables
from ._common import CliError, CliUsageError, plural

__all__ = ["merge"]


def merge(args: Any) -> int:
    if not args.output:
        raise CliUsageError("--merge needs -o OUT (the merged table to write)")
    out = Path(args.output)
    if out.resolve() in {Path(p).resolve() for p in args.merge}:
        raise CliUsageError(f"-o {out} is one of the tables merged; write elsewhere")
    try:
        merged = merge_tables(args.merge)
    except ValueError as err:
        raise CliError(f"polykernel tune --merge: {err}") from None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with locked(out):
            write_json(out, merged.document)
    except (OSError, FileProblem) as err:
        raise CliError(f"polykernel tune --merge: cannot write {out} ({err})") from None
    kept = sum(len(v) for v in merged.document["entries"].values())
    others = len(merged.document.get("others", []))
    print(
        f"merged {plural(len(args.merge), 'table')}: "
        f"{plural(merged.entries, 'entry', 'entries')} -> {kept} in use"
        + (f", {others} kept aside (same case)" if others else "")
        + f"; wrote {out}"
    )
    for conflict in merged.conflicts:
        print(f"conflict: {conflict.line()}")
    if merged.conflicts and args.strict:
        return 1
    return 0
