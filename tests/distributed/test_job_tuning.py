"""Tuned once per job: the processes split the cases, take turns on shared cores,
exchange results and save the same bytes; a process killed or slowed mid-tune
makes no one hang, and a failed job saves nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from jobs import finish, kill_when, run_job, slow_down, start_job

pytestmark = pytest.mark.slow


def _pairs(result: dict) -> list[tuple[str, str]]:
    return [tuple(p) for pairs in result["job"]["timed"].values() for p in pairs]


@pytest.mark.parametrize("count", [2, 4])
def test_distributed_tuning_saves_identical_tables(tmp_path: Path, count: int):
    job = run_job("tune", count, tmp_path, limit=240)
    results = list(job.results.values())
    assert {r["job"]["outcome"] for r in results} == {"complete"}
    assert len({r["table"] for r in results}) == 1  # byte-identical tables
    assert all(r["entries"] == 4 and r["table_changed"] for r in results)
    pairs = _pairs(results[0])
    assert len(pairs) == len(set(pairs)) == 4 * 3  # 4 cases x 3 candidates, once
    timed_by = results[0]["job"]["timed"]
    assert len([p for p in timed_by.values() if p]) == min(count, 4)
    # After the tuning, every process decides from the new, agreed table.
    decisions = [r["decision"] for r in results]
    assert all(d == decisions[0] for d in decisions)
    assert decisions[0]["reason"] == "exact"
    assert len({tuple(r["digests"]) for r in results}) == 1


def test_a_process_killed_mid_tune_makes_all_fall_back(tmp_path: Path):
    job = start_job(
        "tune_marked",
        3,
        tmp_path,
        common={"TEST_CASE_SECONDS": "1.5", "TEST_EXPECT": "0,2"},
    )
    kill_when(job, 1, "tuning-1", delay=1.0)
    killed = time.monotonic()
    finish(job, limit=150, expect_dead=[1])
    for index in (0, 2):
        r = job.results[index]
        assert r["job"]["outcome"].startswith("fallback: "), r["job"]
        assert not r["table_changed"]  # nothing saved
        assert [w[0] for w in r["warnings"]] == ["JobFallbackWarning"]
        assert "fell back" in r["warnings"][0][1]
    assert time.monotonic() - killed < 60


def test_a_process_slowed_ten_times_does_not_split_the_job(tmp_path: Path):
    slow = {"POLYKERNEL_JOB_TIMEOUT": "60", "TEST_SIZES": "1000,30000"}
    job = start_job("tune_marked", 2, tmp_path, common=slow)
    job.wait_marker("tuning-1", 90)
    # Slowed for the whole tuning, the job's collective part; what follows (its
    # programs' first compiles) would only make the test ten times longer.
    slow_down(job.procs[1], 10, until=job.out / "tuned-1")
    finish(job, limit=300)
    outcomes = {r["job"]["outcome"] for r in job.results.values()}
    assert outcomes == {"complete"}, outcomes
    assert len({r["table"] for r in job.results.values()}) == 1
    assert all(r["entries"] == 2 for r in job.results.values())
