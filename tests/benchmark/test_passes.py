"""Cases timed in passes over the whole run (issue 37, item 3): ``run_benchmarks``.

A machine's speed moves in states that can outlast a case (on the 2-core VM, two
scatter kernels run 17 % slower for about 40 s while ``jax_raw`` holds): a case timed
in one stretch reads the state it fell in, and a second run falls in another. Here
the machine is scripted: every kernel is a real ``pure_callback`` that advances a
clock by its time, and one backend is slower while the clock is early in the run.
"""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest

import polykernel as pk
from polykernel.benchmark import (
    BenchmarkConfig,
    BenchmarkResult,
    Progress,
    plan_benchmark,
    run_benchmark,
    run_benchmarks,
)
from polykernel.benchmark.passes import merge_passes, pass_rule
from polykernel.benchmark.record import runs_note
from polykernel.benchmark.sampling import Sampled, StopRule
from polykernel.core import registry
from polykernel.errors import BenchmarkMismatchWarning, BenchmarkValueError


class Machine:
    """A scripted clock: each kernel call advances it by that backend's time,
    ``slow`` times longer for ``slowed`` while the clock is before ``until``."""

    def __init__(self, slowed: str, slow: float, until: float) -> None:
        self.now, self.slowed, self.slow, self.until = 0.0, slowed, slow, until
        self.calls: list[tuple[str, str]] = []

    def __call__(self) -> float:
        return self.now

    def kernel(self, backend: str, offset: float = 0.0):
        def run(x, label):
            self.calls.append((backend, label))
            step = 1e-3
            if backend == self.slowed and self.now < self.until:
                step *= self.slow
            self.now += step
            return np.asarray(x) * 2 + np.float32(offset)

        def make(outs, **kw):
            def kernel(x):
                label = f"n={x.shape[0]}"
                return jax.pure_callback(lambda v: run(v, label), outs, x)

            return kernel

        return make


@pytest.fixture
def make_op(request):
    created = []

    def make(machine: Machine, sizes=(8, 3), offset=0.0):
        name = f"testpasses.{request.node.name}.{len(created)}"
        created.append(name)
        op = pk.XLACustomKernel(name)
        op.def_jax_raw_kernel(machine.kernel("jax_raw"), platform="cpu")
        op.def_kernel("numba", "cpu", machine.kernel("numba", offset))
        op.def_call(
            lambda x, *, backend=None: op(
                x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), backend=backend
            )
        )
        op.def_benchmark_data(
            lambda *, platform: [
                BenchmarkConfig(f"n={n}", (np.ones(n, np.float32),)) for n in sizes
            ]
        )
        return op

    yield make
    for name in created:
        registry.unregister(name)


FIXED = {"n_warmup": 1, "n_runs": 15, "target_spread": None}


def _ratios(result: BenchmarkResult) -> dict[str, float]:
    return {r.label: r.paired_ratio for r in result if r.backend == "numba"}


def test_one_stretch_per_case_reads_the_state_it_fell_in(make_op):
    # The control: numba 1.3x slower for the first 40 ms of the run; the first
    # case is timed within them, the second after them.
    machine = Machine("numba", 1.3, until=0.040)
    op = make_op(machine)
    (result,) = run_benchmarks([plan_benchmark(op, platform="cpu")], clock=machine,
                               **FIXED)  # fmt: skip
    ratios = _ratios(result)
    assert ratios["n=8"] == pytest.approx(1.3)
    assert ratios["n=3"] == pytest.approx(1.0)


def test_passes_over_the_run_give_every_case_the_states_of_the_run(make_op):
    machine = Machine("numba", 1.3, until=0.040)
    op = make_op(machine)
    plan = plan_benchmark(op, platform="cpu")
    (result,) = run_benchmarks([plan], passes=3, clock=machine, **FIXED)
    assert _ratios(result) == {"n=8": pytest.approx(1.0), "n=3": pytest.approx(1.0)}
    for rec in result:
        assert (rec.passes, rec.n, rec.n_sampled, rec.stopped_by) == (3, 15, 15, "runs")
    # Timing order: every case's first pass before any case's second.
    timed = [label for _, label in machine.calls[8:]]  # after 2 x 2 x (1 + 1) calls
    runs = [label for i, label in enumerate(timed) if i == 0 or timed[i - 1] != label]
    assert runs == ["n=8", "n=3"] * 3


def test_passes_hold_every_plan_and_share_out_the_runs(make_op):
    machine = Machine("numba", 1.0, until=0.0)
    first, second = make_op(machine, sizes=(8,)), make_op(machine, sizes=(5, 3))
    plans = [plan_benchmark(op, platform="cpu") for op in (first, second)]
    results = run_benchmarks(plans, passes=2, clock=machine, n_warmup=1, n_runs=5)
    assert [r.primitive_name for r in results] == [first.name, second.name]
    assert [(r.label, r.n, r.passes) for r in results[1]] == [
        ("n=5", 5, 2), ("n=5", 5, 2), ("n=3", 5, 2), ("n=3", 5, 2),
    ]  # fmt: skip
    timed = [label for _, label in machine.calls[12:]]
    runs = [label for i, label in enumerate(timed) if i == 0 or timed[i - 1] != label]
    assert runs == ["n=8", "n=5", "n=3"] * 2
    assert runs_note(5, 5, "runs", 2) == " over 5 of 5 runs in 2 passes"


def test_an_adaptive_rule_gets_its_budget_and_window_shared_out(make_op):
    machine = Machine("numba", 1.0, until=0.0)
    op = make_op(machine, sizes=(8,))
    (result,) = run_benchmarks(
        [plan_benchmark(op, platform="cpu")], passes=3, clock=machine, n_warmup=1,
        n_runs=9, target_spread=0.1, time_budget_s=0.3,
    )  # fmt: skip
    for rec in result:  # each pass: a steady window of 3 rounds, twice (paired)
        assert (rec.passes, rec.n, rec.n_sampled, rec.stopped_by) == (
            3, 9, 18, "spread",
        )  # fmt: skip
        assert rec.paired_ratio == pytest.approx(1.0)


def test_a_progress_line_for_every_case_and_pass(make_op):
    import io

    machine = Machine("numba", 1.0, until=0.0)
    op = make_op(machine)
    out = io.StringIO()
    progress = Progress(out, tty=False)
    plan = plan_benchmark(op, platform="cpu")
    progress.add_total(plan.steps)
    run_benchmarks([plan], passes=2, clock=machine, progress=progress, n_runs=4)
    lines = out.getvalue().splitlines()
    assert lines[4:] == [
        f"[5/8] {op.name} | n=8 | pass 1/2",
        f"[6/8] {op.name} | n=3 | pass 1/2",
        f"[7/8] {op.name} | n=8 | pass 2/2",
        f"[8/8] {op.name} | n=3 | pass 2/2",
    ]


def test_a_plan_that_cannot_run_is_reported_and_the_others_go_on(make_op):
    machine = Machine("numba", 1.0, until=0.0)
    good = plan_benchmark(make_op(machine), platform="cpu")
    bad = plan_benchmark(make_op(machine), platform="cpu")
    bad = type(bad)(bad.kernel, "tpu", bad.backends, bad.configs)  # no such device
    seen = []
    results = run_benchmarks(
        [bad, good], passes=2, clock=machine, n_runs=4,
        on_error=lambda plan, err: seen.append((plan, err)),
    )  # fmt: skip
    assert [r.primitive_name for r in results] == [good.kernel.name]
    ((plan, err),) = seen
    assert plan is bad and isinstance(err, BenchmarkValueError)
    assert "platform 'tpu' is not available" in str(err)
    with pytest.raises(BenchmarkValueError, match="platform 'tpu' is not available"):
        run_benchmarks([bad], clock=machine, n_runs=4)


def test_a_mismatch_warns_at_the_caller_and_is_recorded(make_op):
    machine = Machine("numba", 1.0, until=0.0)
    op = make_op(machine, offset=0.5)
    plan = plan_benchmark(op, platform="cpu")
    with pytest.warns(BenchmarkMismatchWarning, match="disagrees") as caught:
        (result,) = run_benchmarks([plan], passes=2, clock=machine, n_runs=4)
    assert caught[0].filename == __file__
    assert [(m.label, m.backend) for m in result.mismatches] == [
        ("n=8", "numba"), ("n=3", "numba"),
    ]  # fmt: skip
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        op.benchmark(platform="cpu", n_warmup=1, n_runs=3)
    assert again and again[0].filename == __file__


@pytest.mark.parametrize(
    ("passes", "error", "message"),
    [
        (0, BenchmarkValueError, r"passes must be at least 1 and at most n_runs "
         r"\(4\): each pass times a share of the runs; got 0\."),
        (5, BenchmarkValueError, r"at most n_runs \(4\).*got 5\."),
        (True, pk.errors.BenchmarkTypeError,
         r"benchmark: passes must be a whole number, got True\."),
        (2.0, TypeError, r"got 2\.0\."),
    ],
)  # fmt: skip
def test_passes_are_checked(make_op, passes, error, message):
    op = make_op(Machine("numba", 1.0, until=0.0))
    with pytest.raises(error, match=message):
        run_benchmark(op, platform="cpu", n_runs=4, passes=passes)
    with pytest.raises(error, match=message):
        run_benchmarks([plan_benchmark(op, platform="cpu")], n_runs=4, passes=passes)


def test_pass_rule_shares_out_runs_budget_and_cap():
    fixed = StopRule(10)
    assert [pass_rule(fixed, 3, i).n_runs for i in range(3)] == [4, 3, 3]
    assert pass_rule(fixed, 1, 0) is fixed
    adaptive = StopRule(10, 0.05, 2.0, max_runs=100)
    assert pass_rule(adaptive, 3, 1) == StopRule(4, 0.05, 2.0 / 3, 34)


def test_merged_passes_keep_rounds_in_order_and_drop_a_backend_that_raised():
    err = RuntimeError("boom")
    one = Sampled({"a": [1.0], "b": [2.0]}, "spread", {}, {"a": [1.0], "b": [2.0]}, 1)
    two = Sampled({"a": [3.0]}, "max_runs", {"b": err}, {"a": [3.0, 4.0]}, 2)
    merged = merge_passes([one, two])
    assert merged.times_s == {"a": [1.0, 3.0]}
    assert merged.every_round == {"a": [1.0, 3.0, 4.0]}
    assert (merged.stopped_by, merged.rounds) == ("max_runs", 3)
    assert merged.errors == {"b": err}
