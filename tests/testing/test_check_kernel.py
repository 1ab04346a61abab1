"""check_kernel catches broken kernels and rules, and passes correct ones."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.testing import CHECKS, KernelCheckError, check_kernel

_ids = itertools.count()
N = 8
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)
X = np.linspace(-1.0, 1.0, N, dtype=np.float32)


def new_op(label: str) -> pk.XLACustomKernel:
    return pk.XLACustomKernel(f"test.check_kernel.{label}{next(_ids)}")


def statuses(report, check: str) -> dict[tuple[str, str], str]:
    return {(r.backend, r.case): r.status for r in report if r.check == check}


def failed(report) -> set[tuple[str, str, str]]:
    return {(r.check, r.backend, r.case) for r in report.failures}


# -- correct primitives pass -----------------------------------------------------------
@pytest.mark.slow
def test_catalog_csrmv_with_jvp_and_transpose_passes():
    from polykernel.catalog import csrmv_p
    from polykernel.catalog._support import random_csr

    data, indices, indptr = random_csr(10, 7, 0.4, seed=1)
    v = np.random.default_rng(0).random(7).astype(np.float32)
    report = check_kernel(
        csrmv_p,
        data,
        indices,
        indptr,
        v,
        outs=jax.ShapeDtypeStruct((10,), jnp.float32),
        shape=(10, 7),
        transpose=False,
    )
    assert report.ok, str(report)
    backends = {r.backend for r in report}
    assert {"jax_raw", "numba", "cuda_raw"} <= backends
    # Tangents of data (input 0) and v (input 3) reach the primitive in its JVP,
    # so both need (and pass) the transpose test; 15 + 1 vmap patterns each, and
    # the all-None pattern is skipped with its reason.
    assert statuses(report, "transpose")[("numba", "input 3")] == "pass"
    assert statuses(report, "transpose")[("numba", "input 0")] == "pass"
    vmap = statuses(report, "vmap_vs_loop")
    assert len(vmap) == 17 * len(backends)
    assert vmap[("numba", "in_axes=(None, None, None, None)")] == "skip"
    assert statuses(report, "backend_vs_reference")[("numba", "vs jax_raw")] == "pass"


@pytest.mark.slow
def test_catalog_scaled_add_passes_and_records_why_transpose_is_skipped():
    from polykernel.catalog import scaled_add_p

    report = check_kernel(scaled_add_p, X, 2 * X, outs=SPEC, alpha=2.0)
    assert report.ok and not report.failures
    skips = {(r.check, r.detail) for r in report.skipped}
    assert ("transpose", "no transpose rule (def_transpose_rule)") in skips
    assert statuses(report, "grad_vs_jvp")[("cuda_raw", "input 1")] == "pass"
    assert "check_kernel 'polykernel.catalog.scaled_add':" in str(report)


# -- broken kernels and rules are caught -----------------------------------------------
def matvec_op(wrong_transpose: bool) -> pk.XLACustomKernel:
    op = new_op("matvec")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda a, x: a @ x)

    def call(a, x):
        return op.primitive.bind(a, x, outs=(SPEC,), backend=None)

    def transpose(cts, a, x, **params):
        (ct,) = cts
        if type(ct) is jax.interpreters.ad.Zero:
            return None, None
        return None, (a @ ct if wrong_transpose else a.T @ ct)

    op.def_jvp_rule2(lambda t, a, x, **kw: [t @ x], lambda t, a, x, **kw: call(a, t))
    op.def_transpose_rule(transpose)
    return op


@pytest.mark.parametrize("wrong", [False, True])
def test_wrong_transpose_fails_the_dot_product_test(wrong):
    op = matvec_op(wrong_transpose=wrong)
    a = np.random.default_rng(3).standard_normal((N, N)).astype(np.float32)
    report = check_kernel(op, a, X, outs=SPEC, raise_on_failure=False)
    # The JVP of `a` is plain jnp, so only input 1 needs the primitive's transpose.
    assert set(statuses(report, "transpose")) == {("jax_raw", "input 1")}
    if wrong:
        assert failed(report) >= {("transpose", "jax_raw", "input 1")}
        (row,) = [r for r in report.failures if r.check == "transpose"]
        assert "<ct, J t> = " in row.detail and "but <J^T ct, t> = " in row.detail
    else:
        assert report.ok, str(report)


def test_wrong_jvp_fails_against_finite_differences():
    op = new_op("sin")
    op.def_jax_raw_kernel(lambda outs, **kw: jnp.sin)
    op.def_jvp_rule2(lambda t, x, **kw: [t * jnp.sin(x)])  # should be cos
    report = check_kernel(op, X, outs=SPEC, raise_on_failure=False)
    assert failed(report) == {("jvp_vs_fd", "jax_raw", "input 0")}
    (row,) = report.failures
    assert row.detail.startswith("output 0: max |jvp - fd| = ")
    assert row.max_rel > 0.5


def test_backend_off_by_one_element_is_caught():
    import numba

    @numba.njit
    def almost_double(x, out):
        for i in range(out.size):
            out[i] = 2 * x[i]
        out[out.size - 1] += 1

    op = new_op("off_by_one")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(almost_double, outs[0]))
    report = check_kernel(op, X, outs=SPEC, raise_on_failure=False)
    assert failed(report) == {("backend_vs_reference", "numba", "vs jax_raw")}
    (row,) = report.failures
    assert row.detail.startswith("output 0: 1 of 8 elements differ; first at (7,)")
    assert row.max_abs == pytest.approx(1.0)


def test_nondeterministic_numba_kernel_is_caught():
    import numba

    @numba.njit
    def noisy(x, out):
        # Numba's generator state is global and advances on every call.
        for i in range(out.size):
            out[i] = x[i] + np.random.random()

    op = new_op("noisy")
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(noisy, outs[0]))
    report = check_kernel(
        op, X, outs=SPEC, raise_on_failure=False, checks=["determinism"]
    )
    assert failed(report) == {("determinism", "numba", "")}
    assert "8 elements changed between two identical runs" in report.failures[0].detail


def test_nondeterministic_cpp_kernel_with_a_static_counter_is_caught():
    source = """
    void counting(const pk::Tensor& x, pk::Tensor& out) {
      static int calls = 0;  // global state the kernel mutates
      ++calls;
      const float* a = x.data_ptr<float>();
      float* o = out.data_ptr<float>();
      for (int64_t i = 0; i < out.numel(); ++i) o[i] = a[i] + calls;
    }
    """
    module = pk.load_cpp_inline("test_check_kernel_counting", source, ["counting"])
    op = new_op("counting")
    op.def_cuda_raw_kernel(
        lambda outs, **kw: lambda x: module.counting(x, outs=outs[0]), platform="cpu"
    )
    report = check_kernel(
        op, X, outs=SPEC, raise_on_failure=False, checks=["determinism", "jit_vs_eager"]
    )
    assert failed(report) == {
        ("determinism", "cuda_raw", ""),
        ("jit_vs_eager", "cuda_raw", ""),
    }


def test_batching_rule_that_mixes_slices_is_caught():
    op = new_op("mixing")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x, y: x * y)

    def reversed_batch(args, axes, **params):
        outs, out_axes = pk.general_batching_rule(op.primitive, args, axes, **params)
        return [jnp.flip(o, axis=0) for o in outs], out_axes

    op.def_batching_rule(reversed_batch)
    report = check_kernel(op, X, X + 1, outs=SPEC, raise_on_failure=False)
    bad = {case for check, _, case in failed(report) if check == "vmap_vs_loop"}
    assert bad == {
        "in_axes=(0, 0)",
        "in_axes=(0, None)",
        "in_axes=(None, 0)",
        "in_axes=(1, 1)",
    }
    assert failed(report) == {("vmap_vs_loop", "jax_raw", c) for c in bad}


def test_generator_that_raises_is_a_run_failure_and_skips_the_rest():
    op = new_op("raises")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)

    def broken(outs, **kw):
        raise RuntimeError("no kernel today")

    op.def_kernel("broken", "cpu", broken)
    report = check_kernel(op, X, outs=SPEC, raise_on_failure=False)
    assert failed(report) == {("run", "broken", "")}
    assert "no kernel today" in report.failures[0].detail
    assert ("all", "the backend failed to run") in {
        (r.check, r.detail) for r in report.skipped if r.backend == "broken"
    }


# -- references, tolerances and the report ---------------------------------------------
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


def test_failure_raises_an_assertion_error_listing_the_failures():
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


def test_str_of_report_is_a_table():
    op = new_op("table")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
    text = str(check_kernel(op, X, outs=SPEC, checks=["jit_vs_eager", "determinism"]))
    lines = text.splitlines()
    assert lines[0] == f"check_kernel '{op.name}': 2 passed, 0 failed, 0 skipped"
    assert lines[1].split() == [
        "check",
        "backend",
        "platform",
        "case",
        "status",
        "max",
        "abs",
        "max",
        "rel",
    ]
    assert lines[2].split()[:4] == ["jit_vs_eager", "jax_raw", "cpu", "pass"]


def test_checks_constant_lists_every_family():
    assert CHECKS == (
        "abstract_eval",
        "backend_vs_reference",
        "jit_vs_eager",
        "determinism",
        "vmap_vs_loop",
        "jvp_vs_fd",
        "transpose",
        "grad_vs_jvp",
    )


# -- bad arguments ---------------------------------------------------------------------
@pytest.fixture
def op():
    kernel = new_op("args")
    kernel.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x)
    return kernel


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"backends": ["nope"]},
            pk.KernelRegistrationError,
            r"backend 'nope' is not registered \(registered: \['jax_raw'\]\)",
        ),
        (
            {"reference": "nope"},
            pk.KernelRegistrationError,
            r"backend 'nope' is not registered",
        ),
        (
            {"backends": "jax_raw"},
            TypeError,
            r"backends must be a list of names, e\.g\. backends=\['jax_raw'\]",
        ),
        (
            {"reference": 3},
            TypeError,
            r"reference must be a backend name, a callable or None \(got int\)",
        ),
        (
            {"checks": ["vmap"]},
            ValueError,
            r"unknown check\(s\) \['vmap'\]; choose from \['abstract_eval'",
        ),
        ({"atol": -1}, ValueError, r"atol must be a number >= 0 or None \(got -1\)"),
        (
            {"linear_argnums": [3]},
            ValueError,
            r"linear_argnums entry 3 is not an input index \(the call has 1 input\)",
        ),
        (
            {"backend": "jax_raw"},
            ValueError,
            r"pass backends=\[\.\.\.\] to choose backends",
        ),
    ],
)
def test_bad_arguments_are_rejected(op, kwargs, error, match):
    with pytest.raises(error, match=match) as info:
        check_kernel(op, X, outs=SPEC, **kwargs)
    # Our classes, still the builtins callers catch (issue 27).
    if error in (TypeError, ValueError):
        assert isinstance(info.value, pk.CheckError)
    assert isinstance(info.value, pk.PolykernelError)


def test_kernel_must_be_a_primitive_or_a_registered_name(op):
    with pytest.raises(
        pk.CheckTypeError, match=r"kernel must be an XLACustomKernel or the name"
    ):
        check_kernel(3, X, outs=SPEC)
    assert check_kernel(op.name, X, outs=SPEC, checks=["determinism"]).ok


def test_no_kernel_for_a_present_platform_is_reported():
    gpu_only = new_op("gpu_only")
    gpu_only.def_kernel("jax_raw", "gpu", lambda outs, **kw: lambda x: x)
    with pytest.raises(
        pk.KernelNotAvailableError,
        match=r"no selected backend is registered on a platform present here",
    ):
        check_kernel(gpu_only, X, outs=SPEC)


@pytest.mark.parametrize("wrong", [False, True])
def test_transpose_without_jvp_finds_linear_inputs_numerically(wrong):
    op = new_op("scale3")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: (3 * x, x))
    two = [SPEC, SPEC]

    def transpose(cts, x, **params):
        ct0, ct1 = (
            jnp.zeros(SPEC.shape, SPEC.dtype)
            if type(c) is jax.interpreters.ad.Zero
            else c
            for c in cts
        )
        return (3 * ct0 if wrong else 3 * ct0 + ct1,)  # wrong: drops output 1

    op.def_transpose_rule(transpose)
    report = check_kernel(op, X, outs=two, raise_on_failure=False)
    assert statuses(report, "jvp_vs_fd") == {("jax_raw", ""): "skip"}
    assert statuses(report, "transpose") == {
        ("jax_raw", "input 0"): "fail" if wrong else "pass"
    }
    none = check_kernel(op, X, outs=two, linear_argnums=[], checks=["transpose"])
    assert [r.detail for r in none] == ["no linear input (linear_argnums)"]


def test_a_reference_that_fails_is_reported():
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
