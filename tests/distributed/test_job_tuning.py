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


# The plan deals the 4 cases round robin. 2 processes: two cases each, one hands
# the turn to the other. 3: two, one and one (an uneven split), and process 1 both
# waits for a turn and hands one on, as the middle ones of 4 (one case each) would:
# the same code paths as 4, one process (about 2.5 s of CPU) fewer.
@pytest.mark.parametrize("count", [2, 3])
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
    killed_mid_tune = {
        # One case a process, two candidates (one numba build) each: the kill
        # lands while process 1 builds, and the others' own first calls bring
        # them to wait on it.
        "TEST_SIZES": "1000,300,100",
        "TEST_MAX_CANDIDATES": "2",
        # Were process 1 done with its first calls within that second, process
        # 0's timing (its turn comes first: up to 1.5 s under the tuner's
        # default spread target) would keep it waiting past the kill.
        "TEST_CASE_SECONDS": "1.5",
        "TEST_TARGET_SPREAD": "0.05",
        # The others take process 1 for gone 3 s after its last beat (the stall
        # bound is this timeout when under 10 s): 6 beats missed. The votes
        # (within this timeout too) come a fraction of a second apart: the
        # processes leave the job's initialisation together.
        "POLYKERNEL_JOB_TIMEOUT": "3",
        "TEST_EXPECT": "0,2",
    }
    job = start_job("tune_marked", 3, tmp_path, common=killed_mid_tune)
    kill_when(job, 1, "tuning-1", delay=1.0)
    killed = time.monotonic()
    finish(job, limit=150, expect_dead=[1])
    for index in (0, 2):
        r = job.results[index]
        assert r["job"]["outcome"].startswith("fallback: "), r["job"]
        assert "process 1" in r["job"]["outcome"], r["job"]  # because of the kill
        assert not r["table_changed"]  # nothing saved
        assert [w[0] for w in r["warnings"]] == ["JobFallbackWarning"]
        assert "fell back" in r["warnings"][0][1]
    assert time.monotonic() - killed < 60


def test_a_process_slowed_ten_times_does_not_split_the_job(tmp_path: Path):
    slow = {
        # One case a process, two candidates (one numba build) each: process 0
        # waits ~6 s for process 1's first calls, slowed, about twice the stall
        # bound (this timeout when under 10 s): its beats keep the job whole.
        # Its vote, due within the timeout too, comes ~0.2 s (slowed) after it
        # starts tuning.
        "POLYKERNEL_JOB_TIMEOUT": "3",
        "TEST_SIZES": "1000,100",
        "TEST_MAX_CANDIDATES": "2",
    }
    job = start_job("tune_marked", 2, tmp_path, common=slow)
    job.wait_marker("tuning-1", 90)
    # Slowed for the whole tuning, the job's collective part (tune_marked lowers
    # nothing after it: that would only make the test ten times longer).
    slow_down(job.procs[1], 10, until=job.out / "tuned-1")
    finish(job, limit=300)
    outcomes = {r["job"]["outcome"] for r in job.results.values()}
    assert outcomes == {"complete"}, outcomes
    assert len({r["table"] for r in job.results.values()}) == 1
    assert all(r["entries"] == 2 for r in job.results.values())
