"""``op.tune()``: candidates, safety and the seeded faults of issues 28 and 34.

Each fault is a test: a candidate that returns wrong values is never chosen, one
that raises is skipped, tuning inside ``jit`` is refused, a candidate that writes
into its input never touches the caller's arrays, and the budget says what it cut.
"""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest
from tuning_ops import QUICK, configs, make_op

import polykernel as pk
from polykernel.dispatch import Choice, table


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    """Each test tunes into its own config directory (its own tuned.json)."""
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))


def _statuses(report) -> dict[str, str]:
    return {m.candidate.label: m.status for c in report.cases for m in c.measured}


def test_every_backend_and_parameter_is_timed_and_the_winner_recorded():
    op = make_op("tune.basic")
    report = op.tune(platform="cpu", configs=configs((2000,)), **QUICK)
    (case,) = report.cases
    labels = {m.candidate.label for m in case.measured}
    assert labels == {
        "jax_raw",
        "numba(variant='a')",
        "numba(variant='b')",
        "numba(variant='c')",
    }
    assert all(m.status == "ok" and m.median_s > 0 for m in case.measured)
    winner = case.winner.candidate.label
    assert winner != "numba(variant='b')"  # 400 passes: never the fastest
    (entry,) = table.entries_for("tune.basic")
    assert entry.winner == case.winner.candidate
    assert entry.default == Choice.of("jax_raw")  # registered first
    assert {b for b, _ in entry.kernels} == {"jax_raw", "numba"}
    assert dict(entry.best_of("numba").params)["variant"] in ("a", "c")
    assert {m.choice.label for m in entry.measured} == labels
    assert entry.recorded["shape"] == [[2000]]
    assert report.saved_to == table.tuned_path()


def test_a_candidate_with_wrong_values_is_reported_and_never_chosen():
    op = make_op("tune.wrong", variants=("wrong", "a"))
    report = op.tune(platform="cpu", configs=configs((500,)), **QUICK)
    statuses = _statuses(report)
    assert statuses["numba(variant='wrong')"] == "mismatch"
    (case,) = report.cases
    wrong = next(
        m for m in case.measured if m.candidate.params == (("variant", "wrong"),)
    )
    assert "elements differ" in wrong.detail
    assert case.winner.candidate.label != "numba(variant='wrong')"
    (entry,) = table.entries_for("tune.wrong")
    assert dict(entry.best_of("numba").params) == {"variant": "a"}
    # Even the default (first candidate) being wrong is never recorded as usable.
    (wrong_record,) = [m for m in entry.measured if m.choice == wrong.candidate]
    assert wrong_record.status == "mismatch" and not wrong_record.ok


def test_a_candidate_that_fails_to_build_is_recorded_with_its_error_and_skipped():
    op = make_op("tune.raises", variants=("raises", "a"))
    report = op.tune(platform="cpu", configs=configs((500,)), **QUICK)
    (case,) = report.cases
    failed = next(m for m in case.measured if m.status == "error")
    assert failed.candidate.label == "numba(variant='raises')"
    assert "seeded build failure" in failed.detail
    assert (
        case.winner is not None
        and case.winner.candidate.label != failed.candidate.label
    )


def test_tuning_inside_jit_is_refused():
    op = make_op("tune.in_jit")

    def traced(x):
        op.tune(platform="cpu", configs=configs((10,)), **QUICK)
        return x

    with pytest.raises(
        pk.TuningError,
        match=r"tune\(\): tuning runs kernels eagerly "
        r"on fresh buffers and cannot run inside jit, vmap or grad",
    ):
        jax.jit(traced)(np.ones(3, np.float32))
    assert table.entries_for("tune.in_jit") == []


def test_candidates_run_on_fresh_buffers_never_the_callers_arrays():
    op = make_op("tune.clobber", variants=("a", "clobber"))
    cases = configs((64,))
    before = np.array(cases[0].args[0])
    report = op.tune(platform="cpu", configs=cases, **QUICK)
    # The clobbering kernel wrote into its own copy of x (and is refused for it);
    # the caller's array and the other candidates' copies are untouched.
    np.testing.assert_array_equal(cases[0].args[0], before)
    statuses = _statuses(report)
    assert statuses["numba(variant='a')"] == "ok"
    assert statuses["numba(variant='clobber')"] == "mismatch"


def test_the_budget_bounds_the_search_and_the_report_says_what_was_cut():
    op = make_op("tune.budget")
    report = op.tune(
        platform="cpu", configs=configs((100, 200)), max_candidates=2, **QUICK
    )
    # 4 candidates per case, 2 kept: the others are counted, never listed
    assert [c.not_tried for c in report.cases] == [2, 2]
    assert all(m.status != "cut" for c in report.cases for m in c.measured)
    assert "2 more not tried (max_candidates)" in report.table()
    kept = {
        m.candidate.label for c in report.cases for m in c.measured if m.status == "ok"
    }
    assert kept == {"jax_raw", "numba(variant='a')"}  # every backend's default first
    out_of_time = op.tune(
        platform="cpu", configs=configs((100, 200)), max_seconds=1e-9, save=False
    )
    assert out_of_time.cases == []
    assert [c.split(":")[0] for c in out_of_time.cut] == ["cpu n=100", "cpu n=200"]
    assert "cut by the budget: 2" in out_of_time.table()


@pytest.mark.slow
def test_passes_time_every_case_again_and_the_budget_cuts_later_passes():
    op = make_op("tune.passes")
    report = op.tune(
        platform="cpu", configs=configs((100, 200)), save=False, **QUICK | {"passes": 3}
    )
    assert report.passes == 3 and report.to_json()["passes"] == 3
    assert report.cut == [] and all(c.winner for c in report.cases)
    assert all(m.ratio >= 1.0 for c in report.cases for m in c.measured)
    short = op.tune(
        platform="cpu",
        configs=configs((100, 200)),
        passes=50,
        max_seconds=2.0,
        case_seconds=0.05,
        save=False,
    )
    # every case keeps its first pass (and so a winner); the later ones are cut
    assert all(c.winner for c in short.cases)
    assert [c.split(":")[0] for c in short.cut] == ["cpu n=100", "cpu n=200"]
    assert all(c.endswith("of 50 passes not run (max_seconds)") for c in short.cut)


@pytest.mark.parametrize(
    ("passes", "error", "message"),
    [
        (0, pk.TuningValueError, "passes must be >= 1, got 0."),
        (-1, pk.TuningValueError, "passes must be >= 1, got -1."),
        (1.5, pk.TuningTypeError, "passes must be an int >= 1, got float: 1.5."),
        (True, pk.TuningTypeError, "passes must be an int >= 1, got bool: True."),
        ("2", pk.TuningTypeError, "passes must be an int >= 1, got str: '2'."),
    ],
)
def test_passes_must_be_a_positive_integer(passes, error, message, request):
    op = make_op(f"tune.bad_passes.{request.node.callspec.id}")
    with pytest.raises(
        error, match=re.escape(f"XLACustomKernel '{op.name}'.tune(): {message}")
    ):
        op.tune(platform="cpu", configs=configs((10,)), **QUICK | {"passes": passes})


def test_not_saving_leaves_the_table_alone_and_tables_fit_100_columns():
    op = make_op("tune.nosave")
    report = op.tune(platform="cpu", configs=configs((300,)), save=False, **QUICK)
    assert report.saved_to is None and table.entries_for("tune.nosave") == []
    assert max(len(line) for line in report.table().splitlines()) <= 100


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, r"no cases: register benchmark data with def_benchmark_data"),
        ({"platform": "gpu"}, r"no kernels for platform\(s\) \['gpu'\]"),
        (
            {"platform": "cpu", "backends": ["warp"], "configs": configs((4,))},
            r"no backend to tune on cpu \(registered: \['jax_raw'\], asked for: "
            r"\['warp'\]\)",
        ),
    ],
    ids=["no-data", "no-platform", "no-backend"],
)
def test_tuning_that_cannot_run_is_our_error(kwargs, message, request):
    op = pk.XLACustomKernel(f"tune.cannot.{request.node.callspec.id}")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x, platform="cpu")
    if "backends" in kwargs:  # warp is registered, but for the GPU only
        op.def_warp_kernel(lambda outs, **kw: None)
    with pytest.raises(pk.TuningError, match=message):
        op.tune(**kwargs)
