"""check_kernel catches broken kernels and rules, and passes correct ones."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from check_kernel_support import SPEC, N, X, failed, new_op, statuses

import polykernel as pk
from polykernel.testing import check_kernel


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
def test_wrong_transpose_fails_the_dot_product_test(wrong, no_gpu):
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


def test_wrong_jvp_fails_against_finite_differences(no_gpu):
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


@pytest.mark.parametrize("wrong", [False, True])
def test_transpose_without_jvp_finds_linear_inputs_numerically(wrong, no_gpu):
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
