"""A C++ CPU kernel with two outputs and an attribute, called from JAX.

`moments` computes, per row of a matrix, the mean and the mean of |x|^p, where p is
a compile-time attribute. The spec is inferred from the C++ signature:
``["arg", "ret", "ret", "attr.p:float32"]``. Run: ``python examples/cpp_two_outputs.py``
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from polykernel import load_cpp_inline

SOURCE = r"""
#include <cmath>

void moments(const pk::Tensor& x, pk::Tensor& mean, pk::Tensor& pmean, float p) {
  PK_CHECK(x.ndim() == 2, "x must be a matrix, got rank " << x.ndim());
  const int64_t rows = x.shape(0), cols = x.shape(1);
  const float* a = x.data_ptr<float>();
  float* m = mean.data_ptr<float>();
  float* pm = pmean.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, sp = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double v = a[r * cols + c];
      s += v;
      sp += std::pow(std::fabs(v), p);
    }
    m[r] = static_cast<float>(s / cols);
    pm[r] = static_cast<float>(sp / cols);
  }
}
"""


def main() -> None:
    mod = load_cpp_inline("examples.moments", SOURCE, ["moments"])
    print(mod, mod.moments.spec.tokens())

    x = jax.random.normal(jax.random.key(0), (64, 100), dtype=jnp.float32)
    outs = [jax.ShapeDtypeStruct((64,), jnp.float32)] * 2

    @jax.jit
    def f(x):
        return mod.moments(x, outs=outs, p=3.0)

    mean, pmean = f(x)
    xn = np.asarray(x, dtype=np.float64)
    np.testing.assert_allclose(mean, xn.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pmean, (np.abs(xn) ** 3).mean(axis=1), rtol=1e-5)

    # vmap over a batch of matrices: one kernel call per matrix.
    xb = jnp.stack([x, 2 * x])
    mb, _ = jax.vmap(f)(xb)
    np.testing.assert_allclose(mb[1], 2 * xn.mean(axis=1), rtol=1e-5, atol=1e-6)
    print("moments OK:", np.asarray(mean[:3]), np.asarray(pmean[:3]))


if __name__ == "__main__":
    main()
