"""One job, one decision: the processes of a ``jax.distributed`` job (CPU, gloo,
loopback, 2-4 processes of 2 devices each) lower the same kernels from one agreed
table, whatever each process's own table holds — or all fall back together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from dispatch_support import kernels
from jobs import REPO, run_job, write_table

from polykernel.catalog import scaled_add_p
from polykernel.dispatch import device_identity

pytestmark = pytest.mark.slow

SHIPPED = REPO / "src/polykernel/catalog/tuned/cpu.json"
NAME = "polykernel.catalog.scaled_add"


def _entry(winner: dict) -> dict:
    """The shipped entry of the 1000-element case, with another winner, made fresh
    for this machine: measured on its CPU, with the kernels registered here (the
    shipped one names the machine and package versions it was tuned with: on
    another CPU or numba it is a family match or stale, and the job rightly uses
    the defaults)."""
    entries = json.loads(SHIPPED.read_text())["entries"][NAME]
    entry = next(e for e in entries if e["bucket"] == [10, 10])
    device, family = device_identity("cpu")
    here = dict(kernels(scaled_add_p))
    return {**entry, "winner": winner, "device": device, "family": family,
            "kernels": {b: here[b] for b in entry["kernels"] if b in here}}  # fmt: skip


JAX_RAW = {"backend": "jax_raw", "params": {}}
PARALLEL = {"backend": "numba", "params": {"parallel": True}}


def _same(job) -> dict:
    decisions = [r["decision"] for r in job.results.values()]
    digests = [r["digests"] for r in job.results.values()]
    assert all(d == decisions[0] for d in decisions), decisions
    assert all(d == digests[0] for d in digests), digests  # bit-identical
    return decisions[0]


def test_two_processes_with_different_tables_lower_the_same_kernel(tmp_path: Path):
    # Process 1 alone has a table (its winner differs from the shipped one that
    # process 0 would use): both use process 1's entry, and say so.
    write_table(tmp_path / "p1", {NAME: [_entry(JAX_RAW)]})
    job = run_job("decide", 2, tmp_path)
    decision = _same(job)
    assert decision["backend"] == "jax_raw"
    assert decision["reason"] == "exact"
    assert decision["agreed"].startswith("the job's agreed table (2 processes")
    assert all(r["warnings"] == [] for r in job.results.values())


def test_four_processes_half_prewarmed_lower_the_same_kernel(tmp_path: Path):
    # Processes 0 and 2 were tuned before (different winners) and have warm
    # caches; 1 and 3 start bare. The users' own entries come before shipped
    # ones, the lowest process first: process 0's. One process alone warms the
    # cache, deciding from the shipped entries as a job without tables would: it
    # holds csrmv's kernel, which 0 and 2 load, and a scaled_add kernel other
    # than the one the job agrees on (a cache never decides).
    warm = tmp_path / "warm"
    run_job("decide", 1, warm)
    write_table(tmp_path / "p0", {NAME: [_entry(PARALLEL)]})
    write_table(tmp_path / "p2", {NAME: [_entry(JAX_RAW)]})
    cache = {"POLYKERNEL_CACHE_DIR": str(warm / "p0" / "cache")}
    job = run_job("decide", 4, tmp_path, env={0: cache, 2: cache})
    decision = _same(job)
    assert (decision["backend"], decision["params"]) == ("numba", {"parallel": "True"})
    assert "4 processes" in decision["agreed"]


def test_leader_never_publishing_makes_every_process_fall_back(tmp_path: Path):
    # Process 0 joins the job but never lowers: the others wait 1.5 timeouts (1.5
    # s here, for each primitive), claim the fallback, warn once per primitive,
    # and use the defaults. Here the timeout bounds waits for what never comes,
    # and reads of what the store already holds (the claimed outcome): 1 s
    # leaves a loaded machine ample time for those reads.
    job = run_job("absent_leader", 3, tmp_path, common={"POLYKERNEL_JOB_TIMEOUT": "1"})
    others = [job.results[1], job.results[2]]
    assert others[0]["decision"] == others[1]["decision"]
    assert others[0]["digests"] == others[1]["digests"]
    for r in others:
        assert r["decision"]["reason"] == "default"
        assert r["decision"]["agreed"] == "the untuned defaults"
        assert "waited 1.5 s for process 0's table" in r["decision"]["fallback"]
        names = {w[0] for w in r["warnings"]}
        assert names == {"JobFallbackWarning"}
        assert len(r["warnings"]) == 2  # one per primitive lowered
        assert "could not agree on the tuned table of" in r["warnings"][0][1]
        assert r["seconds"] < 2 * 60  # two primitives, each within the bound
