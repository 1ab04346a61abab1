"""One process of a test ``jax.distributed`` job on this machine (CPU, gloo,
loopback): ``python job_worker.py SCENARIO INDEX COUNT PORT OUT``.

It joins the job, runs the scenario and writes what it saw to ``OUT/INDEX.json``
(decisions, output digests, warnings, tables, timings), then leaves with
``os._exit`` (a job whose member was killed cannot shut down in order); process
0, which hosts the job's service, once the others' processes have exited.
Scenarios: ``decide`` (lower two catalog primitives), ``absent_leader`` (process
0 never lowers), ``tune`` (tune scaled_add across the job, then ``decide`` from
the new table), ``tune_marked`` (the tuning alone, between the files
``OUT/tuning-INDEX`` and ``OUT/tuned-INDEX``, for a harness that kills or slows a
process mid-tune).

The tuning's cases (``TEST_SIZES``), its budgets (``TEST_TUNE_SECONDS``,
``TEST_CASE_SECONDS``), its spread target (``TEST_TARGET_SPREAD``) and its
candidates per case (``TEST_MAX_CANDIDATES``) come from the environment.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from pathlib import Path

scenario, index, count, port, out = sys.argv[1:6]
index, count = int(index), int(count)
out = Path(out)
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"

import jax  # noqa: E402

jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=count, process_id=index)

import numpy as np  # noqa: E402

import polykernel as pk  # noqa: E402
from polykernel.catalog import scaled_add, scaled_add_p  # noqa: E402
from polykernel.dispatch.table import tuned_path  # noqa: E402

result: dict = {"index": index, "pid": os.getpid(), "devices": len(jax.devices())}
warnings.simplefilter("always")


def exited(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie not yet reaped has); without
    ``/proc``, after half a second."""
    if not Path("/proc/self/stat").exists():
        time.sleep(0.5)
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def digest(x) -> str:
    return hashlib.sha256(np.asarray(x).tobytes()).hexdigest()


def describe(d) -> dict:
    return {
        "backend": d.backend,
        "params": {k: repr(v) for k, v in d.params.items()},
        "reason": str(d.reason),
        "agreed": d.agreed,
        "fallback": d.job_fallback,
    }


def decide() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the run's JAX compilation cache read mid-write: a miss (tests/conftest.py)
        warnings.filterwarnings("ignore", "Error reading persistent compilation cache")
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        d = scaled_add_p.dispatch(x, y, outs=spec, alpha=1.5, platform="cpu")
        z = jax.jit(lambda a, b: scaled_add(a, b, alpha=1.5))(x, y)
        n = 300
        dense = (rng.random((n, n)) < 0.05) * rng.standard_normal((n, n))
        indptr = np.concatenate([[0], np.cumsum((dense != 0).sum(1))]).astype(np.int32)
        cols = np.nonzero(dense)[1].astype(np.int32)
        data = dense[dense != 0].astype(np.float32)
        v = rng.standard_normal(n).astype(np.float32)
        w = jax.jit(lambda *a: pk.catalog.csrmv(*a, shape=(n, n)))(
            data, cols, indptr, v
        )
    result["seconds"] = time.monotonic() - start
    result["decision"] = describe(d)
    result["digests"] = [digest(z), digest(w)]
    result["explain"] = str(d)
    result["warnings"] = [[type(w.message).__name__, str(w.message)] for w in caught]


def tune(marked: bool) -> None:
    configs = [
        pk.BenchmarkConfig(
            f"n={n}", (np.ones(n, np.float32), np.ones(n, np.float32)), {"alpha": 2.0}
        )
        # Four buckets (ceil(log2(n)): 10, 9, 7, 5), 1000 among them (decide()'s
        # size: its decision after the tuning is "exact"). Small: timing them is
        # cheap, and what the tests check is the job, not the timings.
        for n in map(int, os.environ.get("TEST_SIZES", "1000,300,100,30").split(","))
    ]
    max_candidates = os.environ.get("TEST_MAX_CANDIDATES")
    before = tuned_path().read_bytes() if tuned_path().exists() else b""
    # Numba loads with the first numba kernel; loaded here, it is not part of the
    # tuning (in a process a harness slows down, ten times as long).
    import numba  # noqa: F401

    if marked:
        (out / f"tuning-{index}").write_text("1")
    start = time.monotonic()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the run's JAX compilation cache read mid-write: a miss (tests/conftest.py)
        warnings.filterwarnings("ignore", "Error reading persistent compilation cache")
        report = scaled_add_p.tune(
            platform="cpu",
            configs=configs,
            backends=["jax_raw", "numba"],
            max_seconds=float(os.environ.get("TEST_TUNE_SECONDS", "60")),
            case_seconds=float(os.environ.get("TEST_CASE_SECONDS", "0.3")),
            # A spread (IQR / median) any timing meets: each case stops after its
            # minimum rounds (the tuner's own tests check the timing rules).
            target_spread=float(os.environ.get("TEST_TARGET_SPREAD", "9")),
            max_candidates=int(max_candidates) if max_candidates else None,
            passes=1,
        )
    result["seconds"] = time.monotonic() - start
    if marked:
        (out / f"tuned-{index}").write_text("1")
    result["job"] = report.job
    result["warnings"] = [[type(w.message).__name__, str(w.message)] for w in caught]
    after = tuned_path().read_bytes() if tuned_path().exists() else b""
    result["table_changed"] = after != before
    result["table"] = hashlib.sha256(after).hexdigest()
    result["entries"] = (
        len(json.loads(after)["entries"].get(scaled_add_p.name, [])) if after else 0
    )
    if not marked and report.job and report.job.get("outcome") == "complete":
        decide()


if scenario == "decide":
    decide()
elif scenario == "absent_leader":
    if index == 0:  # joins the job, never lowers: publishes nothing
        time.sleep(float(os.environ.get("TEST_LEADER_SLEEP", "0")))
        result["slept"] = True
    else:
        decide()
elif scenario in ("tune", "tune_marked"):
    tune(scenario == "tune_marked")
else:
    raise SystemExit(f"unknown scenario {scenario}")

written = out / f".{index}.json"  # whole or absent: process 0 reads it
written.write_text(json.dumps(result, indent=1))
written.replace(out / f"{index}.json")
if index == 0:  # it hosts the job's service: the others leave first
    expect = os.environ.get("TEST_EXPECT", ",".join(map(str, range(count))))
    end = time.monotonic() + 60
    for other in (int(i) for i in expect.split(",") if i and int(i) != 0):
        while not (out / f"{other}.json").exists() and time.monotonic() < end:
            time.sleep(0.02)
        if (out / f"{other}.json").exists():
            pid = json.loads((out / f"{other}.json").read_text())["pid"]
            while not exited(pid) and time.monotonic() < end:
                time.sleep(0.01)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
