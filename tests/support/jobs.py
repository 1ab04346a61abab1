"""Running a test ``jax.distributed`` job: N processes of ``job_worker.py`` on
this machine (CPU devices, gloo, loopback), each with its own config, cache and
environment, under a hard time limit (a job past it is killed: a hang fails).

The processes are children of the test process's ``jax`` zygote, started together
(``zygote.start``): each is its own process, as a job's members on one machine
are, without paying JAX's and polykernel's imports once more each. A zygote
imports nothing that reads the variables each member gets (``POLYKERNEL_*``,
``NUMBA_*``, the worker's ``TEST_*``), and starts no JAX backend:
``jax.distributed.initialize`` runs first in each member, as in a fresh one."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import zygote

WORKER = Path(__file__).with_name("job_worker.py")
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Job:
    """The processes of one test job and what each wrote."""

    def __init__(self, procs: list[zygote.Child], out: Path, started: float):
        self.procs, self.out, self.started = procs, out, started
        self.results: dict[int, dict[str, Any]] = {}
        self.wall = 0.0

    def wait_marker(self, name: str, limit: float) -> float:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            if (self.out / name).exists():
                return time.monotonic()
            time.sleep(0.05)
        raise AssertionError(f"{name} did not appear within {limit} s")


def start_job(
    scenario: str,
    count: int,
    tmp: Path,
    env: Mapping[int, Mapping[str, str]] | None = None,
    common: Mapping[str, str] | None = None,
) -> Job:
    """Start ``count`` processes (each with a private config and cache directory
    under ``tmp``, plus ``env[index]``)."""
    out = tmp / "out"
    out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    procs = []
    for index in range(count):
        home = tmp / f"p{index}"
        e = dict(os.environ)
        e.update(
            POLYKERNEL_CONFIG_DIR=str(home / "config"),
            POLYKERNEL_CACHE_DIR=str(home / "cache"),
            NUMBA_CACHE_DIR=str(home / "numba"),
            # The source first, then this process's path (a package installed
            # there, e.g. warp-lang, is seen by the workers too: the same kernels).
            PYTHONPATH=os.pathsep.join(
                filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])
            ),
            # CPU devices only, also on GPU runs: JAX reads it at import (the
            # zygote's), so the worker cannot set it itself.
            JAX_PLATFORMS="cpu",
            NUMBA_THREADING_LAYER="omp",
            POLYKERNEL_JOB_TIMEOUT="6",
        )
        e.update(common or {})
        e.update((env or {}).get(index, {}))
        argv = [str(WORKER), scenario, str(index), str(count), str(port), str(out)]
        log = out / f"log-{index}.txt"
        procs.append(zygote.start(argv, env=e, stdout=log, stderr=subprocess.STDOUT))
    return Job(procs, out, time.monotonic())


def finish(job: Job, limit: float, expect_dead: Sequence[int] = ()) -> Job:
    """Wait for every process (at most ``limit`` s, then kill them all and fail)
    and read what each wrote."""
    end = job.started + limit
    for index, proc in enumerate(job.procs):
        try:
            proc.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            for p in job.procs:
                p.kill()
                p.wait(timeout=60)
            logs = "\n".join(
                f"--- {i}:\n" + (job.out / f"log-{i}.txt").read_text()[-3000:]
                for i in range(len(job.procs))
            )
            raise AssertionError(f"the job hung past {limit} s (process {index})\n"
                                 f"{logs}") from None  # fmt: skip
    job.wall = time.monotonic() - job.started
    for index, proc in enumerate(job.procs):
        if index in expect_dead:
            continue
        path = job.out / f"{index}.json"
        if proc.returncode != 0 or not path.exists():
            log = (job.out / f"log-{index}.txt").read_text()[-4000:]
            raise AssertionError(f"process {index} exited {proc.returncode}:\n{log}")
        job.results[index] = json.loads(path.read_text())
    return job


def run_job(scenario: str, count: int, tmp: Path, limit: float = 120, **kw: Any) -> Job:
    return finish(start_job(scenario, count, tmp, **kw), limit)


def kill_when(job: Job, index: int, marker: str, delay: float) -> None:
    job.wait_marker(marker, 90)
    time.sleep(delay)
    job.procs[index].send_signal(signal.SIGKILL)


def slow_down(
    proc: zygote.Child, factor: int = 10, until: Path | None = None
) -> threading.Thread:
    """Run ``proc`` at about 1/``factor`` speed (stopped 90% of every 100 ms), until
    it exits or the file ``until`` appears."""

    def cycle() -> None:
        period = 0.1
        while proc.poll() is None and (until is None or not until.exists()):
            try:
                proc.send_signal(signal.SIGSTOP)
                time.sleep(period * (1 - 1 / factor))
                proc.send_signal(signal.SIGCONT)
                time.sleep(period / factor)
            except ProcessLookupError:
                return
        return

    thread = threading.Thread(target=cycle, daemon=True)
    thread.start()
    return thread


def write_table(home: Path, entries: Mapping[str, list[Any]]) -> None:
    config = home / "config"
    config.mkdir(parents=True, exist_ok=True, mode=0o700)
    (config / "tuned.json").write_text(
        json.dumps(
            {"format": "polykernel.tuned", "version": 2, "entries": entries}, indent=1
        )
    )
