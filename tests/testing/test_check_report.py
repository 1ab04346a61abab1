"""check_kernel's references and tolerances, and the report it returns or raises."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from check_kernel_support import SPEC, TABLE_HEADER, X, new_op, statuses

import polykernel as pk
from polykernel.testing import CHECKS, KernelCheckError, check_kernel


def test_reference_function_and_backends_compared_with_each_other():
    import numba

    @numba.njit
    def double(x, out):
        for i in range(out.size):
            out[i] = 2 * x[i]

    source = """
    void twice(const pk::Tensor& x, pk::Tensor& out) {
      const float* a = x.data_ptr<float>();
      for (int64_t i = 0; i < out.numel(); ++i) out.data_ptr<float>()[i] = 2.f * a[i];
    }
    """
    module = pk.load_cpp_inline("test_check_kernel_twice", source, ["twice"])
    op = new_op("no_jax_raw")
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(double, outs[0]))
    op.def_cuda_raw_kernel(
        lambda outs, **kw: lambda x: module.twice(x, outs=outs[0]), platform="cpu"
    )
    report = check_kernel(op, X, outs=SPEC, checks=["backend_vs_reference"])
    assert statuses(report, "backend_vs_reference") == {
        ("numba", ""): "skip",
        ("cuda_raw", "vs numba"): "pass",
    }
    wrong = check_kernel(
        op,
        X,
        outs=SPEC,
        reference=lambda x: 3 * x,
        checks=["backend_vs_reference"],
        raise_on_failure=False,
    )
    assert {r.case for r in wrong.failures} == {"vs reference function"}
    assert len(wrong.failures) == 2


def test_failure_raises_an_assertion_error_listing_the_failures(no_gpu):
    op = new_op("raise")
    op.def_jax_raw_kernel(lambda outs, **kw: jnp.sin)
    op.def_jvp_rule2(lambda t, x, **kw: [2 * t])
    with pytest.raises(AssertionError) as info:
        check_kernel(op, X, outs=SPEC)
    err = info.value
    assert isinstance(err, KernelCheckError) and isinstance(err, pk.PolykernelError)
    assert str(err).startswith(f"check_kernel '{op.name}': ")
    assert "1 failed" in str(err) and "jvp_vs_fd" in str(err)
    assert err.report.failures[0].check == "jvp_vs_fd"


def test_user_tolerance_and_check_selection():
    op = new_op("tolerance")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
    op.def_kernel("jax_raw_off", "cpu", lambda outs, **kw: lambda x: 2 * x + 1e-3)
    strict = check_kernel(
        op, X, outs=SPEC, checks=["backend_vs_reference"], raise_on_failure=False
    )
    assert not strict.ok
    loose = check_kernel(op, X, outs=SPEC, checks=["backend_vs_reference"], atol=1e-2)
    assert loose.ok
    assert {r.check for r in loose} == {"backend_vs_reference"}
    assert next(r.detail for r in loose.passed) == "rtol=1e-05 atol=0.01"


def test_str_of_report_is_a_table(no_gpu):
    op = new_op("table")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
    text = str(check_kernel(op, X, outs=SPEC, checks=["jit_vs_eager", "determinism"]))
    lines = text.splitlines()
    assert lines[0] == f"check_kernel '{op.name}': 2 passed, 0 failed, 0 skipped"
    assert lines[1].split() == TABLE_HEADER
    assert lines[2].split()[:4] == ["jit_vs_eager", "jax_raw", "cpu", "pass"]


def test_checks_constant_lists_every_family():
    assert CHECKS == ("abstract_eval", "backend_vs_reference", "jit_vs_eager",
                      "determinism", "vmap_vs_loop", "jvp_vs_fd", "transpose",
                      "grad_vs_jvp")  # fmt: skip


def test_a_reference_that_fails_is_reported(no_gpu):
    op = new_op("bad_reference")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)

    def reference(x):
        raise ZeroDivisionError("reference broke")

    report = check_kernel(
        op,
        X,
        outs=SPEC,
        reference=reference,
        checks=["backend_vs_reference"],
        raise_on_failure=False,
    )
    assert [r.detail for r in report.failures] == [
        "the reference function raised ZeroDivisionError: reference broke"
    ]
    broken = new_op("broken_jax_raw")
    broken.def_jax_raw_kernel(lambda outs, **kw: lambda x: jnp.zeros(3))  # wrong shape
    broken.def_kernel("other", "cpu", lambda outs, **kw: lambda x: 2 * x)
    report = check_kernel(
        broken, X, outs=SPEC, checks=["backend_vs_reference"], raise_on_failure=False
    )
    assert [(r.check, r.backend) for r in report.failures] == [("run", "jax_raw")]
    assert (
        "backend_vs_reference",
        "other",
        "reference backend 'jax_raw' failed to run",
    ) in {(r.check, r.backend, r.detail) for r in report.skipped}


def test_a_reference_registered_on_another_platform_is_run_there(monkeypatch):
    # jax_raw registered for the CPU only, a GPU backend compared with it: the
    # reference runs on the CPU (a GPU machine runs this end to end in
    # tests/backends/triton/test_kernel.py; here the "gpu" is the CPU device).
    import jax
    import numpy as np

    from polykernel.testing import runner
    from polykernel.testing.subject import Subject

    op = new_op("reference_elsewhere")
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: 2 * x)
    cpu = jax.devices("cpu")[0]
    subject = Subject(op, (jnp.asarray(X),), SPEC, {}, "gpu", cpu)
    monkeypatch.setattr(runner, "present_platforms", lambda: {"cpu": cpu, "gpu": cpu})
    outputs, label = runner._reference_elsewhere(subject, "jax_raw")
    assert label == "jax_raw (cpu)"
    np.testing.assert_array_equal(outputs[0], 2 * X)
    monkeypatch.setattr(runner, "present_platforms", lambda: {"gpu": cpu})
    assert runner._reference_elsewhere(subject, "jax_raw") == (None, (
        "!reference backend 'jax_raw' is registered on no platform present here "
        "(this one: gpu; present: ['gpu'])"
    ))  # fmt: skip
