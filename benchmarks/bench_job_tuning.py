"""Tuning once per job: the same cases tuned by one process, and by a
``jax.distributed`` job of 2 and of 4 processes on this machine (CPU devices,
gloo, loopback), each process with its own config and cache directories.

For each run it reports the wall time of ``tune()`` (the slowest process's, in a
job) and of the whole run (fresh processes: start, join, tune, exit), how many
(case, candidate) pairs were timed in the job and whether any was timed twice,
and whether every process saved the same table (SHA-256 of the file's bytes).
Processes on one host take turns timing, so on one machine a job gains only the
first calls (build, compile, correctness checks) made in parallel.

Run: ``python benchmarks/bench_job_tuning.py [--sizes 1000,3000,...] [--json F]``
(``--worker`` is this script's own role inside a job).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _env import cache_environment

SIZES = "1000,3000,10000,30000,100000,300000"
BACKENDS = ["jax_raw", "numba", "cuda_raw"]


def worker(index: int, count: int, port: int, sizes: str, out: Path) -> None:
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    if count > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(
            f"127.0.0.1:{port}", num_processes=count, process_id=index
        )
    import numpy as np

    import polykernel as pk
    from polykernel.catalog import scaled_add_p
    from polykernel.dispatch.table import tuned_path

    configs = [
        pk.BenchmarkConfig(f"n={n}", (np.ones(n, np.float32),) * 2, {"alpha": 2.0})
        for n in map(int, sizes.split(","))
    ]
    start = time.perf_counter()
    report = scaled_add_p.tune(
        platform="cpu", configs=configs, backends=BACKENDS, case_seconds=0.5,
        passes=2, max_seconds=600,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    timed = (
        [p for pairs in report.job["timed"].values() for p in pairs]
        if report.job
        else [[f"cpu {c.label}", m.candidate.token()] for c in report.cases
              for m in c.measured if m.status == "ok"]
    )  # fmt: skip
    result = {
        "seconds": seconds,
        "timed": timed,
        "outcome": (report.job or {}).get("outcome", "alone"),
        "table": hashlib.sha256(tuned_path().read_bytes()).hexdigest(),
    }
    (out / f"{index}.json").write_text(json.dumps(result))
    if index == 0 and count > 1:  # it hosts the job's service: the others go first
        end = time.monotonic() + 60
        while time.monotonic() < end and not all(
            (out / f"{i}.json").exists() for i in range(count)
        ):
            time.sleep(0.05)
        time.sleep(0.5)
    sys.stdout.flush()
    os._exit(0)


def run(count: int, sizes: str, root: Path) -> dict:
    out = root / f"job{count}"
    out.mkdir(parents=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.perf_counter()
    procs = []
    for index in range(count):
        env = {**os.environ, **cache_environment(out / f"p{index}")}
        env["NUMBA_THREADING_LAYER"] = "omp"
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", str(index), str(count), str(port),
             sizes, str(out)], env=env,
        ))  # fmt: skip
    codes = [p.wait(timeout=900) for p in procs]
    wall = time.perf_counter() - start
    results = [json.loads((out / f"{i}.json").read_text()) for i in range(count)]
    pairs = [tuple(p) for p in results[0]["timed"]]
    return {
        "processes": count,
        "exit codes": codes,
        "tune seconds (slowest process)": round(max(r["seconds"] for r in results), 2),
        "run wall seconds": round(wall, 2),
        "pairs timed": len(pairs),
        "pairs timed twice": len(pairs) - len(set(pairs)),
        "outcomes": sorted({r["outcome"] for r in results}),
        "identical tables": len({r["table"] for r in results}) == 1,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        index, count, port, sizes, out = sys.argv[2:7]
        worker(int(index), int(count), int(port), sizes, Path(out))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=SIZES)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pk-job-bench-") as tmp:
        rows = [run(count, args.sizes, Path(tmp)) for count in (1, 2, 4)]
    for row in rows:
        print(json.dumps(row))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
