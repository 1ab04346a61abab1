"""Many processes on one cache: correctness and build counts (issue 20's acceptance).

``PROCESSES`` processes start together on one fresh cache directory and each loads
the same ``KERNELS`` C++ modules and ``KERNELS`` Numba kernels
(``tests/support/cache_stress_child.py``), runs them and checks the results with NumPy.
Three scenarios, each on its own fresh cache:

1. ``shared``: plain; every kernel must be built exactly once across the processes;
2. ``shared + prune loop``: another process runs ``polykernel cache prune
   --max-bytes 0`` back to back the whole time; every result correct, no failed
   build (builds may repeat, since pruned entries are rebuilt);
3. ``no locks``: ``POLYKERNEL_CACHE_LOCKING=0`` (filesystems without working file
   locks); every result correct, builds may repeat, every published entry whole.

Run: ``python benchmarks/bench_cache_concurrency.py [--processes 8] [--kernels 5]
[--json [PATH]]``. Exit status 1 if a scenario fails its check.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _env import cache_environment, run_directory

CHILD = Path(__file__).resolve().parents[1] / "tests/support/cache_stress_child.py"


def _env(run_dir: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", NUMBA_THREADING_LAYER="omp")
    env.update(cache_environment(run_dir), **extra)
    env.pop("POLYKERNEL_CACHE_READONLY", None)
    return env


def _prune_loop(env: dict[str, str]) -> subprocess.Popen:
    code = (
        "import sys\nfrom polykernel.cli import main\n"
        "while True:\n    main(['cache', 'prune', '--max-bytes', '0'])\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)  # fmt: skip


def scenario(name: str, processes: int, kernels: int, **options: str) -> dict:
    run_dir = Path(run_directory("polykernel-bench-cache-"))
    prune = options.pop("prune", "")
    env = _env(run_dir, **options)
    admin = _prune_loop(env) if prune else None
    start = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, str(CHILD), str(kernels)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]  # fmt: skip
    reports, failures = [], []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            failures.append(err[-2000:])
            continue
        reports.append(json.loads(out.strip().splitlines()[-1]))
    seconds = time.perf_counter() - start
    admin_alive = True
    if admin is not None:
        admin_alive = admin.poll() is None
        admin.kill()
        _, admin_err = admin.communicate()
        if not admin_alive:
            failures.append(f"prune loop died: {admin_err[-2000:]}")
    native = [sum(r["native"][i] for r in reports) for i in range(kernels)]
    numba = [sum(r["numba"][i] == "built" for r in reports) for i in range(kernels)]
    errors = [e for r in reports for e in r["errors"]] + failures
    return {
        "scenario": name,
        "processes": processes,
        "kernels": kernels,
        "all_correct": len(reports) == processes and all(r["ok"] for r in reports),
        "errors": errors,
        "native_builds_per_kernel": native,
        "numba_builds_per_kernel": numba,
        "seconds": round(seconds, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--kernels", type=int, default=5)
    parser.add_argument("--json", nargs="?", const="-", default=None)
    args = parser.parse_args()
    n, k = args.processes, args.kernels
    results = [
        scenario("shared", n, k),
        scenario("shared + prune loop", n, k, prune="1"),
        scenario("no locks", n, k, POLYKERNEL_CACHE_LOCKING="0"),
    ]
    checks = [
        results[0]["all_correct"] and results[0]["native_builds_per_kernel"] == [1] * k
        and results[0]["numba_builds_per_kernel"] == [1] * k,
        results[1]["all_correct"] and not results[1]["errors"],
        results[2]["all_correct"] and not results[2]["errors"],
    ]  # fmt: skip
    print(f"{'scenario':<22} {'correct':>7} {'C++ builds/kernel':>20} "
          f"{'Numba builds/kernel':>20} {'seconds':>8}")  # fmt: skip
    for r, ok in zip(results, checks, strict=True):
        print(f"{r['scenario']:<22} {r['all_correct']!s:>7} "
              f"{r['native_builds_per_kernel']!s:>20} "
              f"{r['numba_builds_per_kernel']!s:>20} {r['seconds']:>8}"
              f"{'' if ok else '   FAILED'}")  # fmt: skip
        for e in r["errors"][:3]:
            print("   ", e)
    if args.json is not None:
        text = json.dumps(results, indent=2)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
