"""``polykernel list``: the registered primitives, their backends and tags."""

from __future__ import annotations

import json
from typing import Any

from .selection import add_selection_args, select

__all__ = ["cmd_list", "register"]


def register(sub: Any, common: Any) -> None:
    """Add the ``list`` sub-command to ``sub``."""
    p = sub.add_parser("list", parents=[common], help="list registered primitives")
    add_selection_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=cmd_list)


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
    rows = [_describe(k) for k in select(args).values()]
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
