"""Run one benchmark against two polykernel source trees, side by side, in one run.

    python benchmarks/side_by_side.py --old ../old/src --new src \\
        [--rounds 3] bench_dispatch.py --quick

The benchmark script (from this folder, the new tree's) runs in a fresh process per
round and per tree, alternating old/new so that machine noise hits both alike, with
``PYTHONPATH`` pointing at each tree's ``src`` and ``--json PATH`` appended. Every
number of the two JSON reports is matched by its path (a list counts by its
median), and the table prints the median over rounds of each, and new / old;
numbers that are the same in every run (labels, sizes) are left out.

The benchmark must import polykernel through names both trees have (the public
API); each report records which tree it ran (``polykernel`` path) in the header.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def _leaves(data: Any, path: str = "") -> dict[str, float]:
    """Every number of a JSON document by its path; a list of numbers by median."""
    if isinstance(data, bool):
        return {}
    if isinstance(data, int | float):
        return {path: float(data)}
    if isinstance(data, list) and data and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in data
    ):
        return {path: float(statistics.median(data))}
    out: dict[str, float] = {}
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = ((_row_name(v, i), v) for i, v in enumerate(data))
    else:
        return out
    for key, value in items:
        out.update(_leaves(value, f"{path}/{key}" if path else str(key)))
    return out


def _row_name(row: Any, index: int) -> str:
    """A list row's name: its string fields (e.g. impl and n), else its index."""
    if isinstance(row, dict):
        parts = [f"{v}" for k, v in row.items() if isinstance(v, str)]
        parts += [f"{k}={v}" for k, v in row.items() if k in ("n", "N", "size")]
        if parts:
            return ",".join(parts)
    return str(index)


def _run(tree: Path, script: Path, args: list[str], out: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree.resolve()))
    subprocess.run([sys.executable, str(script), *args, "--json", str(out)],
                   env=env, check=True, stdout=subprocess.DEVNULL)  # fmt: skip
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="old tree's src/")
    parser.add_argument("--new", type=Path, required=True, help="new tree's src/")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="also write the table as JSON")
    parser.add_argument("script", help="benchmark script in benchmarks/")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    opts = parser.parse_args(argv)
    script = HERE / opts.script
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(opts.rounds):
            for label in ("old", "new"):
                tree = opts.old if label == "old" else opts.new
                out = Path(tmp) / f"{label}{r}.json"
                runs[label].append(_leaves(_run(tree, script, opts.args, out)))
                print(f"round {r + 1}/{opts.rounds}: {label} done", file=sys.stderr)
    keys = [k for k in runs["new"][0] if all(k in run for run in runs["old"])]
    # Labels and sizes (the same number in every run of both trees) are no metric.
    every = runs["old"] + runs["new"]
    keys = [k for k in keys if len({run.get(k) for run in every}) > 1]
    rows = []
    for key in keys:
        old = statistics.median(run[key] for run in runs["old"])
        new = statistics.median(run[key] for run in runs["new"] if key in run)
        rows.append({"metric": key, "old": old, "new": new,
                     "ratio": new / old if old else float("nan")})  # fmt: skip
    width = max(len(r["metric"]) for r in rows)
    print(f"{opts.script} {' '.join(opts.args)}: median of {opts.rounds} rounds each")
    print(f"{'metric':<{width}}  {'old':>12}  {'new':>12}  new/old")
    for r in rows:
        print(f"{r['metric']:<{width}}  {r['old']:>12.4g}  {r['new']:>12.4g}  "
              f"{r['ratio']:6.3f}")  # fmt: skip
    if opts.json:
        opts.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
