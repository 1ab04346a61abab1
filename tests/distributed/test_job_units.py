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


def test_a_job_agrees_on_the_device_of_the_platform_it_lowers(monkeypatch):
    # A GPU machine simulated (make test-gpu: JAX_PLATFORMS=cpu,cuda, a GPU is the
    # default device): a job lowering for the CPU agrees on the CPU's identity, the
    # one its processes' tables were tuned under, not the default device's.
    from polykernel import _jax_compat
    from polykernel.core import tuning_methods
    from polykernel.dispatch import device_identity
    from polykernel.dispatch.agreement import View

    class H200:
        device_kind, compute_capability, platform = "NVIDIA H200", "9.0", "gpu"

    cpu_devices, cpu_local = jax.devices, jax.local_devices

    def gpu_first(real):
        def devices(*args, backend=None, **kw):
            if backend in (None, "gpu", "cuda") and not args:
                return [H200()]
            return real(*args, backend=backend, **kw)

        return devices

    monkeypatch.setattr(jax, "devices", gpu_first(cpu_devices))
    monkeypatch.setattr(jax, "local_devices", gpu_first(cpu_local))
    assert device_identity("gpu") == ("NVIDIA H200", "sm_90")
    agreed = []

    def view(registered, local, device):
        agreed.append((registered.platform, device))
        return View((), device, "the job's agreed table (simulated)")

    monkeypatch.setattr(_jax_compat, "distributed_job", lambda: (None, 0, 2))
    monkeypatch.setattr(tuning_methods, "agreed_view", view)
    x = jax.ShapeDtypeStruct((1000,), jnp.float32)
    decision = scaled_add_p.dispatch(x, x, outs=x, alpha=2.0, platform="cpu")
    assert decision.agreed == "the job's agreed table (simulated)"
    assert set(agreed) == {("cpu", device_identity("cpu"))}
    assert agreed[0][1][0].endswith(" cores)")  # the host CPU, not the H200


def test_a_job_report_says_what_this_process_did():
    from polykernel.tuning.report import TuneReport

    report = TuneReport("p", job={"process": 1, "processes": 2, "cases_in_job": 4,
                                  "outcome": "complete"})  # fmt: skip
    assert report.table().splitlines()[1] == (
        "job: process 1 of 2, 0 of 4 cases timed here; complete"
    )
    assert "job:" not in TuneReport("p").table()
