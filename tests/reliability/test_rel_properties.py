"""Hypothesis: drawn shapes, dtypes and vmap axes; every backend agrees with NumPy.

Catalog operations (``scaled_add``, ``csrmv``, ``event_csrmv``, ``lif_step``) run on
every backend registered here (``jax_raw``, ``numba``, ``cuda_raw``), eagerly or
under ``vmap`` with drawn ``in_axes`` (``None`` included); conformance operations
are ``numba_kernel`` / ``XLACustomKernel`` kernels drawn over dtypes, ranks and
``vmap_method``. Each draw must not crash and must match the NumPy reference.
The ``ci`` profile runs a few derandomised examples per test; the ``long`` profile
(``POLYKERNEL_HYPOTHESIS_PROFILE=long``, tests marked ``slow``) runs hundreds.
"""

from __future__ import annotations

import functools

import jax
import numba
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from reliability_support import profiles

import polykernel as pk
from polykernel import catalog

PROFILES = profiles()


def backends_of(primitive):
    """Every CPU backend ``primitive`` has here (installed optional ones included)."""
    return st.sampled_from(sorted(set(primitive.available_backends("cpu"))))


def _run(profile, test):
    """Run the ``@given`` function ``test`` under ``profile``'s settings."""
    settings(settings.get_profile(profile))(test)()


@st.composite
def batched(draw, n_args: int):
    """(batch size, in_axes) with at least one mapped argument."""
    axes = draw(
        st.lists(st.sampled_from([None, 0, 1, -1]), min_size=n_args, max_size=n_args)
        .filter(lambda a: any(x is not None for x in a))
    )  # fmt: skip
    return draw(st.integers(1, 4)), tuple(axes)


def _stack(x: np.ndarray, b: int, axis: int | None, rng) -> np.ndarray:
    """``b`` variants of ``x`` stacked along ``axis`` (``x`` itself if None)."""
    if axis is None:
        return x
    copies = [x * (1 + k) + rng.standard_normal(x.shape).astype(x.dtype) for k in
              range(b)] if x.dtype.kind == "f" else [x] * b  # fmt: skip
    return np.stack(copies, axis=axis)


def _take(x: np.ndarray, k: int, axis: int | None) -> np.ndarray:
    return x if axis is None else np.take(x, k, axis=axis)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_scaled_add_any_shape_dtype_and_axes(profile):
    @given(
        shape=st.lists(st.integers(0, 12), min_size=1, max_size=2).map(tuple),
        dtype=st.sampled_from([np.float32, np.float64, np.float16, np.int32]),
        alpha=st.floats(-8, 8, allow_nan=False, width=32),
        backend=backends_of(catalog.scaled_add_p),
        vmapped=st.booleans(),
        batch=batched(2),
        seed=st.integers(0, 2**16),
    )
    def check(shape, dtype, alpha, backend, vmapped, batch, seed):
        rng = np.random.default_rng(seed)
        x = (rng.standard_normal(shape) * 4).astype(dtype)
        y = (rng.standard_normal(shape) * 4).astype(dtype)
        f = functools.partial(catalog.scaled_add, alpha=alpha, backend=backend)
        ref = lambda a, b: alpha * a.astype(np.float32) + b.astype(np.float32)  # noqa: E731
        if not vmapped:
            np.testing.assert_allclose(f(x, y), ref(x, y), rtol=1e-5, atol=1e-5)
            return
        b, axes = batch
        xs, ys = (_stack(a, b, ax, rng) for a, ax in zip((x, y), axes, strict=True))
        got = np.asarray(jax.vmap(f, in_axes=axes)(xs, ys))
        for k in range(b):
            want = ref(_take(xs, k, axes[0]), _take(ys, k, axes[1]))
            np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-5)

    _run(profile, check)


@st.composite
def csr_matrices(draw):
    m, n = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    mask = draw(st.lists(st.booleans(), min_size=m * n, max_size=m * n))
    dense = np.zeros((m, n), np.float32)
    values = np.linspace(-2, 3, m * n, dtype=np.float32)
    dense.flat[np.flatnonzero(mask)] = values[np.flatnonzero(mask)]
    rows, cols = np.nonzero(dense)
    indptr = np.zeros(m + 1, np.int32)
    np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
    return dense, dense[rows, cols], cols.astype(np.int32), indptr


@pytest.mark.parametrize("profile", PROFILES)
def test_csrmv_any_matrix_transpose_and_vmap_axis(profile):
    @given(
        csr=csr_matrices(),
        transpose=st.booleans(),
        backend=backends_of(catalog.csrmv_p),
        batch=st.none() | st.tuples(st.integers(1, 3), st.sampled_from([0, 1])),
    )
    def check(csr, transpose, backend, batch):
        dense, data, indices, indptr = csr
        a = dense.T if transpose else dense
        v = np.linspace(-1, 1, a.shape[1], dtype=np.float32)
        f = functools.partial(catalog.csrmv, data, indices, indptr, shape=dense.shape,
                              transpose=transpose, backend=backend)  # fmt: skip
        if batch is None:
            np.testing.assert_allclose(f(v), a @ v, rtol=1e-5, atol=1e-5)
            return
        b, axis = batch
        vs = np.stack([v * (k + 1) for k in range(b)], axis=axis)
        got = np.asarray(jax.vmap(f, in_axes=axis)(vs))
        for k in range(b):
            np.testing.assert_allclose(got[k], a @ (v * (k + 1)), rtol=1e-5,
                                       atol=1e-5)  # fmt: skip

    _run(profile, check)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_event_csrmv_any_matrix_and_spikes(profile):
    event_backends = backends_of(catalog.event_csrmv_p)

    @given(csr=csr_matrices(), backend=event_backends, data=st.data())
    def check(csr, backend, data):
        dense, weights, indices, indptr = csr
        m, n = dense.shape
        spikes = np.array(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)))
        got = catalog.event_csrmv(weights, indices, indptr, spikes, n_post=n,
                                  backend=backend)  # fmt: skip
        want = dense.T @ spikes.astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

    _run(profile, check)


@pytest.mark.parametrize("profile", PROFILES)
def test_lif_step_any_shape_and_vmap(profile):
    @given(
        shape=st.lists(st.integers(0, 5), min_size=1, max_size=2).map(tuple),
        backend=backends_of(catalog.lif_step_p),
        batch=batched(2),
        vmapped=st.booleans(),
        seed=st.integers(0, 2**16),
    )
    def check(shape, backend, batch, vmapped, seed):
        rng = np.random.default_rng(seed)
        v = rng.uniform(-75, -50, shape).astype(np.float32)
        i = rng.uniform(0, 40, shape).astype(np.float32)

        def ref(v, i):
            cand = v + 0.1 * (-(v - -70.0) * 0.05 + i)
            return np.where(cand >= -55.0, np.float32(-70.0), cand), cand >= -55.0

        f = functools.partial(catalog.lif_step, backend=backend)
        if not vmapped:
            v_next, spikes = f(v, i)
            want_v, want_s = ref(v, i)
            np.testing.assert_allclose(v_next, want_v, rtol=1e-5, atol=1e-4)
            np.testing.assert_array_equal(spikes, want_s)
            return
        b, axes = batch
        vs, is_ = (_stack(a, b, ax, rng) for a, ax in zip((v, i), axes, strict=True))
        v_next, spikes = jax.vmap(f, in_axes=axes)(vs, is_)
        for k in range(b):
            want_v, want_s = ref(_take(vs, k, axes[0]), _take(is_, k, axes[1]))
            np.testing.assert_allclose(v_next[k], want_v, rtol=1e-5, atol=1e-4)
            np.testing.assert_array_equal(spikes[k], want_s)

    _run(profile, check)


# -- conformance operations: user kernels over dtypes, ranks and vmap methods --------
@numba.njit
def _axpy_kernel(x, y, out):
    xf, yf, of = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    for i in range(of.size):
        of[i] = xf[i] * 3 + yf[i]


@numba.njit
def _minmax_kernel(x, y, lo, hi):
    xf, yf = x.reshape(-1), y.reshape(-1)
    lof, hif = lo.reshape(-1), hi.reshape(-1)
    for i in range(xf.size):
        lof[i] = min(xf[i], yf[i])
        hif[i] = max(xf[i], yf[i])


AXPY = pk.XLACustomKernel("reliability.properties.axpy")
AXPY.def_jax_raw_kernel(lambda outs, **kw: lambda x, y: (x * 3 + y).astype(x.dtype))
AXPY.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(_axpy_kernel, outs[0]))
# The dtypes JAX keeps as they are (float64/int64 only when x64 is enabled).
DTYPES = [
    d
    for d in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.int16)
    if jax.dtypes.canonicalize_dtype(d) == d
]
VMAP_METHODS = ["sequential", "expand_dims", "broadcast_all"]


def _array(rng, shape, dtype):
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 40, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_conformance_ops_any_dtype_rank_and_vmap_method(profile):
    @given(
        shape=st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple),
        dtype=st.sampled_from(DTYPES),
        method=st.sampled_from(VMAP_METHODS),
        batch=batched(2),
        seed=st.integers(0, 2**16),
    )
    def check(shape, dtype, method, batch, seed):
        rng = np.random.default_rng(seed)
        spec = jax.ShapeDtypeStruct(shape, dtype)
        x, y = _array(rng, shape, dtype), _array(rng, shape, dtype)
        # the primitive: numba vs the jax_raw reference vs NumPy
        want = (x * 3 + y).astype(dtype)
        for backend in ("numba", "jax_raw"):
            got = AXPY(x, y, outs=spec, backend=backend)
            # XLA and LLVM may fuse x * 3 + y into one FMA: one rounding fewer
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
        # a bare numba_kernel with two outputs under vmap
        kernel = pk.numba_kernel(_minmax_kernel, [spec, spec], vmap_method=method)
        b, axes = batch
        xs, ys = (_stack(a, b, ax, rng) for a, ax in zip((x, y), axes, strict=True))
        lo, hi = jax.vmap(kernel, in_axes=axes)(xs, ys)
        for k in range(b):
            xk, yk = _take(xs, k, axes[0]), _take(ys, k, axes[1])
            np.testing.assert_array_equal(lo[k], np.minimum(xk, yk))
            np.testing.assert_array_equal(hi[k], np.maximum(xk, yk))

    _run(profile, check)
