"""Measure and write the tuned tables the catalog ships (``catalog/tuned/cpu.json``).

Tunes every catalog primitive on its benchmark data and, for ``scaled_add`` and
``csrmv``, on the shapes ``bench_tuning.py`` tunes on, into a private config
directory, then exports the entries as the table ``polykernel.catalog`` registers
with ``def_tuned_table``. Calls on a machine of the same CPU model and core count get
these winners exactly (or the nearest shape); machines of the same instruction-set
family get them as a family match; others fall back to the defaults until the user
tunes (``polykernel tune polykernel.catalog``). Every case is tuned with
``contention=True``: among candidates tied on the idle machine the table keeps the
one that holds up with the other cores busy, and a candidate replaces the default
only where it is faster beyond the measured spread. Each entry records the identity
of the kernels it measured, so the table goes stale (and is not used) when a
catalog kernel or the Numba version changes: run this script again then.

Run: ``python benchmarks/ship_catalog_tables.py [--quick]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE.parent / "src" / "polykernel" / "catalog" / "tuned" / "cpu.json"


def tune_one(name: str, quick: bool) -> None:
    """Tune one catalog primitive (in this process) into the run's config dir."""
    import bench_tuning

    from polykernel import catalog

    (op,) = [p for p in catalog.PRIMITIVES if p.name == name]
    seconds = 0.5 if quick else 1.5
    tuned = [i for i in range(bench_tuning.N_SHAPES) if i not in bench_tuning.HELD_OUT]
    # contention=True: among candidates tied on the idle machine, the table keeps
    # the one that holds up with the other cores busy (machines it ships to are).
    op.tune(platform="cpu", case_seconds=seconds, max_seconds=900, contention=True)
    short = op.name.rsplit(".", 1)[1]
    if short in bench_tuning.PRIMITIVES:
        op.tune(
            platform="cpu",
            configs=bench_tuning.configs(short, tuned),
            case_seconds=seconds,
            max_seconds=900,
            contention=True,
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    if args.only:
        tune_one(args.only, args.quick)
        return 0
    from _env import cache_environment, run_directory

    run_dir = Path(run_directory("polykernel-ship-tables-"))

    os.environ.update(JAX_PLATFORMS="cpu", NUMBA_THREADING_LAYER="omp")
    os.environ.update(cache_environment(run_dir))
    from polykernel import catalog
    from polykernel.dispatch import writing

    # Each primitive in its own fresh process, as a user's `polykernel tune` runs:
    # what one primitive's timing leaves in a process never reaches the next.
    for op in catalog.PRIMITIVES:
        cmd = [sys.executable, __file__, "--only", op.name]
        subprocess.run(cmd + (["--quick"] if args.quick else []), check=True)
    n = writing.export_entries(TARGET, [p.name for p in catalog.PRIMITIVES])
    print(f"wrote {n} entries to {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
