"""The pieces of a job's agreement that need no job: who takes turns, the
timeout's setting, a process alone."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from polykernel.catalog import scaled_add_p
from polykernel.dispatch.agreement import TIMEOUT_ENV, job_store, timeout_s
from polykernel.errors import TuningValueError
from polykernel.tuning.job import _sharing


def _vote(process: int, host: str, cores: list[int]) -> dict:
    return {"process": process, "host": host, "cores": cores}


def test_processes_sharing_cores_take_turns_and_others_do_not():
    votes = [
        _vote(0, "a", [0, 1]),
        _vote(1, "a", [2, 3]),  # same host, other cores: its own group
        _vote(2, "a", [1, 2]),  # overlaps both: joins them into one
        _vote(3, "b", [0, 1]),  # another host: never waits for host a
    ]
    assert sorted(_sharing(votes).values()) == [[0, 1, 2], [3]]
    assert sorted(_sharing(votes[:2] + votes[3:]).values()) == [[0], [1], [3]]


def test_the_timeout_is_checked(monkeypatch):
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert timeout_s() == 30.0
    monkeypatch.setenv(TIMEOUT_ENV, "2.5")
    assert timeout_s() == 2.5
    for bad in ("0", "-1", "nan", "soon", "4000"):
        monkeypatch.setenv(TIMEOUT_ENV, bad)
        with pytest.raises(
            TuningValueError,
            match=rf"\$POLYKERNEL_JOB_TIMEOUT='{bad}'"
            r" is not a number of seconds in \(0, 3600\]",
        ):
            timeout_s()


def test_a_process_alone_decides_from_its_own_tables():
    assert job_store() is None
    x = jax.ShapeDtypeStruct((1000,), jnp.float32)
    decision = scaled_add_p.dispatch(x, x, outs=x, alpha=2.0, platform="cpu")
    assert decision.agreed is None and decision.job_fallback is None
    assert "from the job" not in str(decision)


def test_a_job_report_says_what_this_process_did():
    from polykernel.tuning.report import TuneReport

    report = TuneReport("p", job={"process": 1, "processes": 2, "cases_in_job": 4,
                                  "outcome": "complete"})  # fmt: skip
    assert report.table().splitlines()[1] == (
        "job: process 1 of 2, 0 of 4 cases timed here; complete"
    )
    assert "job:" not in TuneReport("p").table()
