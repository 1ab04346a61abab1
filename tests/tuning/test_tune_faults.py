""" "The tuner can hurt" (issue 34): each case found, as a test.

A candidate that writes into its input, a default that fails to build, a candidate
slower than the budget or one that never returns, a cut grid of 90,000 candidates,
misspelt or doubly-defaulted launch parameters, a ``def_tune_key`` returning junk,
a call's own launch parameter, and two candidates that are really one kernel.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tuning_ops import QUICK, configs, finish, grid_op, make_op, spec

import polykernel as pk
from polykernel.dispatch import Choice, table

#: The test of twin candidates, about timing, keeps the tuner's default spread and
#: passes; the tests of what is refused, reported or recorded take QUICK.
FAST = {"max_seconds": 60.0, "case_seconds": 0.3}
SUPPORT = Path(__file__).resolve().parents[1] / "support"


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    """Each test tunes into its own config directory (its own tuned.json)."""
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))


def _measured(report) -> dict[str, object]:
    """``{candidate label: Measured}`` of a one-case report."""
    (case,) = report.cases
    return {m.candidate.label: m for m in case.measured}


# -- (a) a candidate that writes into its input ---------------------------------------


@pytest.mark.parametrize("as_jax", [False, True], ids=["numpy", "jax"])
def test_a_candidate_that_writes_into_its_input_is_never_chosen(as_jax):
    # 'clobber' is hundreds of times faster than 'b', the default: a tuner that
    # timed it would pick it, and every later call would overwrite its input.
    op = make_op(f"faults.clobber.{as_jax}", variants=("b", "clobber"), reference=False)
    cases = configs((2000,))
    if as_jax:
        cases[0] = cases[0].put_args()
    before = np.array(cases[0].args[0])
    report = op.tune(platform="cpu", configs=cases, **QUICK)
    measured = _measured(report)
    clobber = measured["numba(variant='clobber')"]
    assert clobber.status == "mismatch" and not clobber.chosen
    assert clobber.detail == (
        "it wrote into its input 0 (kernels must not change their inputs; declare "
        "input_output_aliases to write in place)"
    )
    assert report.winners() == {"n=2000": "numba(variant='b')"}
    np.testing.assert_array_equal(np.asarray(cases[0].args[0]), before)
    (entry,) = table.entries_for(op.name)
    assert entry.winner == Choice.of("numba", {"variant": "b"})
    assert entry.best_of("numba") != Choice.of("numba", {"variant": "clobber"})
    # an ordinary jitted call afterwards leaves the caller's array alone
    x = jnp.asarray(before)
    np.testing.assert_allclose(jax.jit(op.call)(x), 2 * before)
    np.testing.assert_array_equal(np.asarray(x), before)


def test_a_default_that_writes_into_its_input_falls_back_to_a_clean_reference():
    op = make_op("faults.clobber.default", variants=("clobber", "a"), reference=False)
    cases = [configs((500,))[0].put_args()]
    before = np.array(cases[0].args[0])
    report = op.tune(platform="cpu", configs=cases, save=False, **QUICK)
    measured = _measured(report)
    assert measured["numba(variant='clobber')"].status == "mismatch"
    assert measured["numba(variant='a')"].chosen
    (case,) = report.cases
    assert case.reference == "numba(variant='a')"
    np.testing.assert_array_equal(np.asarray(cases[0].args[0]), before)


# -- (b) a default that fails to build ------------------------------------------------


def test_a_default_candidate_that_fails_to_build_is_recorded_and_tuning_goes_on():
    op = make_op("faults.raises.default", variants=("raises", "a"))
    report = op.tune(platform="cpu", configs=configs((500,)), **QUICK)
    failed = _measured(report)["numba(variant='raises')"]
    assert failed.status == "error" and "seeded build failure" in failed.detail
    assert report.winners()["n=500"] in ("jax_raw", "numba(variant='a')")
    (entry,) = table.entries_for(op.name)
    recorded = {m.choice.label: m for m in entry.measured}
    assert recorded["numba(variant='raises')"].status == "error"
    assert "seeded build failure" in recorded["numba(variant='raises')"].detail
    assert entry.best_of("numba") == Choice.of("numba", {"variant": "a"})


def test_without_a_reference_a_failing_default_hands_the_reference_on():
    op = make_op("faults.raises.noref", variants=("raises", "a"), reference=False)
    report = op.tune(platform="cpu", configs=configs((500,)), **QUICK)
    (case,) = report.cases
    assert case.reference == "numba(variant='a')"
    assert case.notes == [
        "the reference numba(variant='raises') did not run cleanly; outputs were "
        "compared with numba(variant='a')'s"
    ]
    assert _measured(report)["numba(variant='raises')"].status == "error"
    assert "the reference numba(variant='raises') did not run" in report.table()
    (entry,) = table.entries_for(op.name)
    assert entry.default == Choice.of("numba", {"variant": "raises"})
    assert entry.winner == Choice.of("numba", {"variant": "a"})
    d = op.dispatch(spec(500), outs=spec(500))
    assert (d.backend, dict(d.params), d.reason) == ("numba", {"variant": "a"}, "exact")
    np.testing.assert_allclose(op.call(jnp.ones(500)), 2 * np.ones(500))


# -- (c) max_seconds bounds the run ----------------------------------------------------


def test_max_seconds_bounds_a_run_with_a_slow_candidate():
    op = make_op("faults.slow", variants=("a", "slow"))
    t0 = time.perf_counter()
    report = op.tune(
        platform="cpu", configs=configs((100,)), max_seconds=1.0, save=False
    )
    took = time.perf_counter() - t0
    # a call takes ~2 s: the old tuner took 19 s here
    assert took < 6.0, report.table()
    slow = _measured(report)["numba(variant='slow')"]
    assert slow.status in ("timeout", "cut") and not slow.chosen
    if slow.status == "timeout":
        assert re.fullmatch(r"it did not return within [0-9.]+ s", slow.detail)
        assert any(
            "numba(variant='slow'): abandoned in n=100" in n for n in report.notes
        )


_NEVER_RETURNS = """
import json, sys, time
sys.path.insert(0, {support!r})
from polykernel.tuning import runner
from tuning_ops import configs, make_op, spin_iterations
runner.MIN_SHARE_S = 1.0  # so the spinning candidate leaves time for a second case
spin_iterations(2.0)  # calibrated before the clock starts
op = make_op("faults.spin", variants=("spin", "a"))
t0 = time.perf_counter()
report = op.tune(platform="cpu", configs=configs((100, 200)), max_seconds=4.0,
                 case_seconds=0.2, save=False)
took = time.perf_counter() - t0
statuses = [{{m.candidate.label: [m.status, m.detail] for m in c.measured}}
            for c in report.cases]
print(json.dumps({{"took": took, "statuses": statuses, "notes": report.notes}}),
      flush=True)
"""


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_a_candidate_that_never_returns_is_abandoned_and_the_process_exits():
    code = _NEVER_RETURNS.format(support=str(SUPPORT))
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        printed = time.perf_counter()
        assert proc.wait(timeout=120) == 0, proc.stderr.read()[-3000:]
        exited = time.perf_counter() - printed
    finally:
        proc.kill()
        proc.communicate()
    found = json.loads(line)
    # the spinning kernel runs ~25 s: tune() returns near its budget, and the
    # process exits without waiting for the abandoned call
    assert found["took"] < 8.0, found
    assert exited < 10.0, found
    first, second = found["statuses"]
    status, detail = first["numba(variant='spin')"]
    assert status == "timeout" and detail.startswith("it did not return within")
    assert first["numba(variant='a')"][0] == "ok"
    assert second["numba(variant='spin')"] == [
        "timeout",
        "not run: abandoned in case n=100",
    ]
    assert any("may still be running" in n for n in found["notes"])


# -- (d) max_candidates on a large grid ------------------------------------------------


def test_a_cut_grid_writes_only_what_was_measured(tmp_path):
    op = grid_op("faults.grid", 300)
    report = op.tune(
        platform="cpu", configs=configs((1000,)), max_candidates=3, **QUICK
    )
    (case,) = report.cases
    assert case.not_tried == 300 * 300 + 1 - 3  # jax_raw's one candidate too
    assert [m.candidate.label for m in case.measured] == [
        "jax_raw",
        "numba(a=0, b=0)",
        "numba(a=0, b=1)",
    ]
    assert f"{300 * 300 + 1 - 3} more not tried (max_candidates)" in report.table()
    (entry,) = table.entries_for(op.name)
    assert len(entry.measured) <= 3
    assert table.tuned_path().stat().st_size < 20_000


# -- (e) launch parameters are declared by the generator -------------------------------


def test_a_misspelt_launch_parameter_is_refused_with_a_suggestion():
    op = pk.XLACustomKernel("faults.names.misspelt")

    def gen(outs, BLOCK, **kw):
        return lambda x: x

    with pytest.raises(
        pk.KernelRegistrationError,
        match=re.escape(
            "XLACustomKernel 'faults.names.misspelt'.def_kernel('numba', tune=...): "
            "the generator has no parameter 'BLOK' (did you mean 'BLOCK'?); its "
            "parameters are ['outs', 'BLOCK']. Add 'BLOK' to its signature (a "
            "**kwargs does not count: it would take a misspelt name silently), or "
            "fix the name in tune=."
        ),
    ):
        op.def_numba_kernel(gen, tune={"BLOK": [256, 1024]})
    with pytest.raises(pk.KernelRegistrationError, match=r"no parameter 'BLOCK'; "):
        op.def_numba_kernel(lambda outs, **kw: None, tune={"BLOCK": [256]})
    assert op.available_backends("cpu") == []


def test_a_signature_default_other_than_the_first_candidate_is_refused():
    op = pk.XLACustomKernel("faults.names.default")

    def gen(outs, BLOCK=256):
        return lambda x: x

    with pytest.raises(
        pk.KernelRegistrationError,
        match=re.escape(
            "the generator's default BLOCK=256 differs from the first candidate "
            "1024, which is the default of a launch parameter. Drop the default "
            "from the signature (the lowering always passes a value), or list it "
            "first in tune=."
        ),
    ):
        op.def_numba_kernel(gen, tune={"BLOCK": [1024, 256]})
    op.def_numba_kernel(gen, tune={"BLOCK": [256, 1024]})  # the same default: fine
    assert op.tunables("cpu") == {"numba": (("BLOCK", (256, 1024)),)}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (np.int64(256), "a NumPy int64 (use a Python value, e.g. int(v) or float(v))"),
        ([2, 2], "a list (use a tuple)"),
        (float("nan"), "the non-finite float nan"),
        (None, "None"),
    ],
    ids=["numpy", "list", "nan", "none"],
)
def test_a_candidate_a_table_cannot_hold_exactly_is_refused(value, problem, request):
    op = pk.XLACustomKernel(f"faults.values.{request.node.callspec.id}")
    with pytest.raises(
        pk.KernelTypeError,
        match=re.escape(
            f"candidate {value!r} of 'BLOCK' is {problem}; a candidate is a bool, "
            f"int, finite float, str or a tuple of these"
        ),
    ):
        op.def_numba_kernel(lambda outs, BLOCK: None, tune={"BLOCK": [value]})


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_jax_raw_takes_tune_and_tuple_candidates_come_back_as_tuples():
    op = pk.XLACustomKernel("faults.jax_raw_tune")
    seen = []

    def gen(outs, tile):
        seen.append(tile)
        return lambda x: 2 * x

    op.def_jax_raw_kernel(gen, platform="cpu", tune={"tile": [(1, 1), (2, 2)]})
    finish(op)
    assert op.tunables("cpu") == {"jax_raw": (("tile", ((1, 1), (2, 2))),)}
    report = op.tune(platform="cpu", configs=configs((100, 10_000)), **QUICK)
    assert {type(t) for t in seen} == {tuple}
    entries = table.entries_for(op.name)
    assert len(entries) == 2 and report.saved_to == table.tuned_path()
    for entry in entries:
        assert isinstance(dict(entry.winner.params)["tile"], tuple)
        assert {m.status for m in entry.measured} == {"ok"}
    between = op.dispatch(spec(1000), outs=spec(1000))
    assert between.reason in ("exact", "nearest")
    assert dict(between.params)["tile"] in ((1, 1), (2, 2))
    assert isinstance(dict(between.params)["tile"], tuple)
    np.testing.assert_allclose(jax.jit(op.call)(jnp.ones(1000)), 2 * np.ones(1000))


# -- (f) def_tune_key results are checked ----------------------------------------------

KEY_FIX = "; return a tuple of ints, e.g. (ins[0].shape[0] // 64,)."


@pytest.mark.parametrize(
    ("returned", "got"),
    [
        (None, "NoneType None"),
        (float("nan"), "float nan"),
        (float("inf"), "float inf"),
        ("12", "str '12'"),
        ((True,), "(True,), holding bool True"),
        ((1.5,), "(1.5,), holding float 1.5"),
        ((np.float32(2),), f"{(np.float32(2),)!r}, holding float32 {np.float32(2)!r}"),
    ],
    ids=["none", "nan", "inf", "str", "bool", "float", "numpy-float"],
)
def test_a_tune_key_that_is_not_a_tuple_of_ints_is_our_error(returned, got, request):
    op = pk.XLACustomKernel(f"faults.key.{request.node.callspec.id}")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    op.def_tune_key(lambda *, ins, outs, **params: returned)
    message = re.escape(
        f"XLACustomKernel '{op.name}': the def_tune_key function returned {got}"
    )
    with pytest.raises(pk.KernelTypeError, match=message) as raised:
        op.dispatch(spec(8), outs=spec(8))
    assert str(raised.value).endswith(KEY_FIX)
    with pytest.raises(pk.KernelTypeError, match=message):
        jax.jit(lambda x: op(x, outs=spec(8)))(jnp.ones(8))


def test_a_tune_key_of_numpy_ints_is_a_bucket():
    op = pk.XLACustomKernel("faults.key.numpy-int")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    op.def_tune_key(lambda *, ins, outs, **params: (np.int64(3), 4))
    d = op.dispatch(spec(8), outs=spec(8))
    assert d.key.bucket == (3, 4) and all(type(b) is int for b in d.key.bucket)
    np.testing.assert_allclose(op(jnp.ones(8), outs=spec(8)), 2 * np.ones(8))


# -- (g) the call's own launch parameter wins, and dispatch says so -------------------


def test_dispatch_reports_the_launch_parameters_the_call_passes():
    op = make_op("faults.from_call", variants=("b", "a"))
    report = op.tune(platform="cpu", configs=configs((5000,)), backends=["numba"],
                     **QUICK)  # fmt: skip
    (entry,) = table.entries_for(op.name)
    assert entry.winner == Choice.of("numba", {"variant": "a"})  # 'b' is 400x work
    # 'b' dropped from the race in its first rounds does not compete: its three
    # rounds under load once tied it with 'a' (3.65x +-448 %), and it won as the
    # first declared.
    b = next(m for m in report.cases[0].measured if m.candidate.params[0][1] == "b")
    assert b.raced == ("out of the race" not in b.detail) and not b.chosen
    tuned = op.dispatch(spec(5000), outs=spec(5000), backend="numba")
    assert dict(tuned.params) == {"variant": "a"} and tuned.from_call == ()
    mine = op.dispatch(spec(5000), outs=spec(5000), backend="numba", variant="b")
    assert dict(mine.params) == {"variant": "b"}
    assert "variant" in mine.from_call
    # a launch parameter is what an entry decides, never part of the key
    assert mine.key == tuned.key and mine.entry == tuned.entry


# -- (h) a tuned pick is never worse than the default ---------------------------------


def test_two_candidates_that_are_one_kernel_leave_the_default_the_winner():
    """'a' and 'c' build the same kernel: their calls lower to one program, timed
    once, and 'c' takes its figures, so the two tie and the default stays. (Timed
    apart, noise decided: in a CI run whose other worker held both cores the copy
    measured 6 % faster, beyond the ranking's 3 % resolution, and won.)"""
    op = make_op("faults.same", variants=("a", "c"), reference=False)
    report = op.tune(platform="cpu", configs=configs((100_000,)), **FAST)
    (entry,) = table.entries_for(op.name)
    assert entry.default == Choice.of("numba", {"variant": "a"})
    assert entry.winner == entry.default, report.table()
    (case,) = report.cases
    by = {m.candidate.label: m for m in case.measured}
    a, c = by["numba(variant='a')"], by["numba(variant='c')"]
    assert (a.status, c.status) == ("ok", "ok")
    assert c.detail == "the same program as numba(variant='a'): timed once"
    assert (c.ratio, c.median_s, c.rounds) == (a.ratio, a.median_s, a.rounds)
    assert a.chosen and not c.chosen
    # Both are recorded as tried, with the same figures.
    assert {m.choice for m in entry.measured} == {a.candidate, c.candidate}
