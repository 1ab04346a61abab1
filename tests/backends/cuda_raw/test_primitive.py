"""A C++ CPU backend (def_cuda_raw_kernel) and a Numba backend of one op agree."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk_root
from polykernel import load_cpp_inline
from polykernel.core.primitive import XLACustomKernel

numba = pytest.importorskip("numba")
from polykernel.backends.numba import numba_kernel  # noqa: E402

CPP = """void axpy(const pk::Tensor& x, const pk::Tensor& y, pk::Tensor& out,
                   float alpha) {
  const float* a = x.data_ptr<float>(); const float* b = y.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = alpha * a[i] + b[i];
}"""


@numba.njit
def _axpy_numba(x, y, out, alpha):
    for i in range(out.size):
        out.flat[i] = alpha * x.flat[i] + y.flat[i]


def cpp_generator(outs, alpha, **_):
    mod = load_cpp_inline("test_native_prim", CPP, ["axpy"])  # cached after first
    return lambda x, y: mod.axpy(x, y, outs=list(outs), alpha=alpha)


def numba_generator(outs, alpha, **_):
    kern = numba_kernel(_axpy_numba, outs=list(outs), vmap_method="sequential")
    return lambda x, y: kern(x, y, alpha=np.float32(alpha))


@pytest.fixture(scope="module")
def op():
    op = XLACustomKernel("test_native.axpy")
    op.def_numba_kernel(numba_generator)
    op.def_cuda_raw_kernel(cpp_generator, platform="cpu")
    return op


def test_cpp_and_numba_backends_agree(op):
    assert pk_root is not None
    x = jnp.linspace(-1, 1, 24, dtype=jnp.float32).reshape(4, 6)
    y = jnp.ones((4, 6), jnp.float32)
    outs = [jax.ShapeDtypeStruct((4, 6), jnp.float32)]

    def run(backend):
        return jax.jit(lambda a, b: op(a, b, outs=outs, backend=backend, alpha=1.5))(
            x, y
        )

    ref = 1.5 * np.asarray(x) + 1
    (via_cpp,), (via_numba,) = run("cuda_raw"), run("numba")
    np.testing.assert_allclose(via_cpp, ref, rtol=1e-6)
    np.testing.assert_allclose(via_cpp, via_numba, rtol=1e-6)
    batched = jax.vmap(
        lambda a: op(
            a,
            a,
            outs=[jax.ShapeDtypeStruct((6,), jnp.float32)],
            backend="cuda_raw",
            alpha=2.0,
        )[0]
    )(x)
    np.testing.assert_allclose(batched, 3 * np.asarray(x), rtol=1e-6)
