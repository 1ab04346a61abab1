"""``event_csrmv``: event-driven synaptic input from a boolean spike vector.

Rows of the CSR matrix are presynaptic neurons, column indices postsynaptic ones:
``y[indices[k]] += data[k]`` for every entry ``k`` of a row whose neuron spiked. Only
spiking rows are visited, so the cost scales with the number of spikes, not ``nnz``.
Linear in ``data`` (JVP provided); ``spikes`` is boolean and has no tangent.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.primitive import XLACustomKernel
from ._support import has_cxx, has_numba, random_csr, row_ids

__all__ = ["event_csrmv", "event_csrmv_p"]

_CPP = """
#include <cstdint>
void event_csrmv(const pk::Tensor& data, const pk::Tensor& indices,
                 const pk::Tensor& indptr, const pk::Tensor& spikes, pk::Tensor& out) {
  const float* d = data.data_ptr<float>();
  const uint32_t* idx = reinterpret_cast<const uint32_t*>(indices.data_ptr<int32_t>());
  const int32_t* ptr = indptr.data_ptr<int32_t>();
  const bool* s = spikes.data_ptr<bool>();
  float* y = out.data_ptr<float>();
  const int64_t rows = indptr.numel() - 1;
  PK_CHECK(spikes.numel() == rows, "event_csrmv: spikes must have n_rows entries");
  for (int64_t k = 0; k < out.numel(); ++k) y[k] = 0.f;
  // A scatter: two rows may add into the same entry, so no pk::parallel_for here.
  for (int64_t i = 0; i < rows; ++i) {
    if (!s[i]) continue;
    for (int64_t j = ptr[i]; j < ptr[i + 1]; ++j) y[idx[j]] += d[j];
  }
}
"""


def _jax_generator(outs: Any, n_post: int, **kwargs: Any) -> Any:
    def kernel(data, indices, indptr, spikes):
        rows = row_ids(indptr, data.shape[0])
        weights = jnp.where(spikes[rows], data, jnp.zeros_like(data))
        return jax.ops.segment_sum(weights, indices, num_segments=n_post)

    return kernel


def _numba_generator(outs: Any, **kwargs: Any) -> Any:
    import numba

    from ..backends.numba import numba_kernel

    @numba.njit
    def kernel(data, indices, indptr, spikes, out):
        out[:] = 0
        for i in range(spikes.size):
            if spikes[i]:
                for j in range(indptr[i], indptr[i + 1]):
                    out[np.uint64(indices[j])] += data[j]

    return numba_kernel(kernel, outs=outs[0])


def _cpp_generator(outs: Any, **kwargs: Any) -> Any:
    from ..backends.cuda_raw import load_cpp_inline

    module = load_cpp_inline("polykernel_catalog_event_csrmv", _CPP, ["event_csrmv"])
    return lambda *args: module.event_csrmv(*args, outs=outs[0])


event_csrmv_p = XLACustomKernel("polykernel.catalog.event_csrmv")
event_csrmv_p.def_jax_raw_kernel(_jax_generator, platform="cpu")
if has_numba():
    event_csrmv_p.def_numba_kernel(_numba_generator, asdefault=True)
if has_cxx():
    event_csrmv_p.def_cuda_raw_kernel(_cpp_generator, platform="cpu")
# Registered last, so a GPU kernel stays the default: the GPU benchmarks' reference.
event_csrmv_p.def_jax_raw_kernel(_jax_generator, platform="gpu")
event_csrmv_p.def_tags("csr", "binary", "event", "mv")


def event_csrmv(
    data: Any,
    indices: Any,
    indptr: Any,
    spikes: Any,
    *,
    n_post: int,
    backend: str | None = None,
) -> jax.Array:
    """Sum the weights of spiking presynaptic rows into ``n_post`` outputs.

    Example:
        >>> import numpy as np
        >>> from polykernel.catalog import event_csrmv
        >>> data = np.array([1.0, 2.0, 3.0], np.float32)
        >>> indices, indptr = np.array([0, 1, 1]), np.array([0, 2, 3])
        >>> spikes = np.array([True, False])
        >>> event_csrmv(data, indices, indptr, spikes, n_post=2,
        ...             backend="jax_raw").tolist()
        [1.0, 2.0]
    """
    spec = jax.ShapeDtypeStruct((n_post,), jnp.float32)
    return event_csrmv_p(
        jnp.asarray(data, jnp.float32),
        jnp.asarray(indices, jnp.int32),
        jnp.asarray(indptr, jnp.int32),
        jnp.asarray(spikes, bool),
        outs=spec,
        n_post=int(n_post),
        backend=backend,
    )


def _jvp_data(t, data, indices, indptr, spikes, **params):
    return [event_csrmv_p.primitive.bind(t, indices, indptr, spikes, **params)[0]]


def _benchmark_data(*, platform: str) -> list[Any]:
    from ..benchmark import BenchmarkConfig

    configs = []
    rng = np.random.default_rng(4)
    # The small case is the one `polykernel check` runs (it picks the smallest).
    for n_pre, n_post, p, rates in (
        (2000, 1000, 0.05, (0.1,)),
        (20000, 10000, 0.05, (0.01, 0.1)),
    ):
        data, indices, indptr = random_csr(n_pre, n_post, p, seed=3)
        for rate in rates:
            spikes = rng.random(n_pre) < rate
            configs.append(
                BenchmarkConfig(
                    f"{n_pre}x{n_post},p={p},rate={rate}",
                    (data, indices, indptr, spikes),
                    {"n_post": n_post},
                    {"rate": rate, "nnz": int(data.size)},
                )
            )
    return configs


event_csrmv_p.def_jvp_rule2(_jvp_data, None, None, None)
event_csrmv_p.def_call(event_csrmv)
event_csrmv_p.def_benchmark_data(_benchmark_data)
