"""A library that loads a C++ kernel when it is imported (before its user sets up JAX).

``multiprocess_child.py`` imports it first, then calls ``jax.distributed.initialize``:
loading the kernel must not have started JAX. ``scale_rows`` is a primitive backed by
the C++ kernel, split by rows over a mesh (``def_batch_partitioning``).
"""

from __future__ import annotations

import jax
import numpy as np

import polykernel as pk

SOURCE = r"""
void scale_rows(const pk::Tensor& x, pk::Tensor& out) {
  const int64_t rows = x.shape(0), cols = x.shape(1);
  const float* a = x.data_ptr<float>(); float* o = out.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) o[r * cols + c] = (c + 1) * a[r * cols + c];
}
"""
MODULE = pk.load_cpp_inline("kernel_library.scale_rows", SOURCE, ["scale_rows"])

scale_rows = pk.XLACustomKernel("kernel_library.scale_rows")
scale_rows.def_cuda_raw_kernel(
    lambda outs, **kw: lambda x: MODULE.scale_rows(x, outs=outs[0]), platform="cpu"
)
scale_rows.def_batch_partitioning()


def call(x: jax.Array) -> jax.Array:
    return scale_rows(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))


def expected(x: np.ndarray) -> np.ndarray:
    return x * np.arange(1, x.shape[1] + 1, dtype=x.dtype)
