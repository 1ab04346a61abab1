"""``event_csrmv``: event-driven synaptic input from a boolean spike vector.

Rows of the CSR matrix are presynaptic neurons, column indices postsynaptic ones:
``y[indices[k]] += data[k]`` for every entry ``k`` of a row whose neuron spiked. Only
spiking rows are visited, so the cost scales with the number of spikes, not ``nnz``.
Linear in ``data`` (JVP provided); ``spikes`` is boolean and has no tangent.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.primitive import XLACustomKernel
from ._support import has_cxx, has_numba, random_csr, row_ids

__all__ = ["event_csrmv", "event_csrmv_p"]

_CPP = """
#include <algorithm>
#include <cstdint>
#include <vector>
void event_csrmv(const pk::Tensor& data, const pk::Tensor& indices,
                 const pk::Tensor& indptr, const pk::Tensor& spikes, pk::Tensor& out,
                 int64_t grain) {
  const float* d = data.data_ptr<float>();
  const uint32_t* idx = reinterpret_cast<const uint32_t*>(indices.data_ptr<int32_t>());
  const int32_t* ptr = indptr.data_ptr<int32_t>();
  const bool* s = spikes.data_ptr<bool>();
  float* y = out.data_ptr<float>();
  const int64_t rows = indptr.numel() - 1, n = out.numel();
  PK_CHECK(spikes.numel() == rows, "event_csrmv: spikes must have n_rows entries");
  PK_CHECK(grain >= 0, "event_csrmv: grain must be >= 0 (0: serial), got " << grain);
  auto scatter = [&](float* acc, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      if (!s[i]) continue;
      for (int64_t j = ptr[i]; j < ptr[i + 1]; ++j) acc[idx[j]] += d[j];
    }
  };
  const int64_t pieces = grain == 0 ? 1 : std::min<int64_t>(
      pk::num_threads(), rows > 0 ? (ptr[rows] + grain - 1) / grain : 1);
  for (int64_t k = 0; k < n; ++k) y[k] = 0.f;
  if (pieces <= 1) { scatter(y, 0, rows); return; }
  // A scatter: two rows may add into one entry, so each piece scatters into a
  // private copy of y, summed in piece order (deterministic).
  std::vector<float> partial(static_cast<size_t>(pieces) * n, 0.f);
  const int64_t chunk = (rows + pieces - 1) / pieces;
  pk::parallel_for(0, pieces, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p)
      scatter(partial.data() + p * n, p * chunk, std::min(rows, (p + 1) * chunk));
  });
  pk::parallel_for(0, n, 1 << 14, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      float acc = 0.f;
      for (int64_t p = 0; p < pieces; ++p) acc += partial[p * n + k];
      y[k] = acc;
    }
  });
}
"""
#: Launch parameters tuned per device and size (``docs/tuning.md``); the first of
#: each is the default (serial: a scatter gains from threads only when large).
NUMBA_TUNE = {"parallel": [False, True]}
CPP_TUNE = {"grain": [0, 32768, 262144]}


def _jax_generator(outs: Any, n_post: int, **kwargs: Any) -> Any:
    def kernel(data, indices, indptr, spikes):
        rows = row_ids(indptr, data.shape[0])
        weights = jnp.where(spikes[rows], data, jnp.zeros_like(data))
        return jax.ops.segment_sum(weights, indices, num_segments=n_post)

    return kernel


@functools.cache
def _numba_kernels() -> dict[bool, Any]:
    import numba

    def serial(data, indices, indptr, spikes, out):
        out[:] = 0
        for i in range(spikes.size):
            if spikes[i]:
                for j in range(indptr[i], indptr[i + 1]):
                    out[np.uint64(indices[j])] += data[j]

    def parallel(data, indices, indptr, spikes, out):
        # Two rows may add into one entry: each thread's rows go to a private copy.
        pieces = numba.get_num_threads()
        rows = spikes.size
        chunk = (rows + pieces - 1) // pieces
        partial = np.zeros((pieces, out.size), np.float32)
        for p in numba.prange(pieces):
            for i in range(p * chunk, min(rows, (p + 1) * chunk)):
                if spikes[i]:
                    for j in range(indptr[i], indptr[i + 1]):
                        partial[p, np.uint64(indices[j])] += data[j]
        for k in numba.prange(out.size):
            acc = np.float32(0)
            for p in range(pieces):
                acc += partial[p, k]
            out[k] = acc

    return {False: numba.njit(serial), True: numba.njit(parallel=True)(parallel)}


def _numba_generator(outs: Any, parallel: bool = False, **kwargs: Any) -> Any:
    from ..backends.numba import numba_kernel

    return numba_kernel(_numba_kernels()[bool(parallel)], outs=outs[0])


def _cpp_generator(outs: Any, grain: int = CPP_TUNE["grain"][0], **kwargs: Any) -> Any:
    from ..backends.cuda_raw import load_cpp_inline

    module = load_cpp_inline("polykernel_catalog_event_csrmv", _CPP, ["event_csrmv"])
    return lambda *args: module.event_csrmv(*args, outs=outs[0], grain=int(grain))


event_csrmv_p = XLACustomKernel("polykernel.catalog.event_csrmv")
event_csrmv_p.def_jax_raw_kernel(_jax_generator, platform="cpu")
if has_numba():
    event_csrmv_p.def_numba_kernel(_numba_generator, asdefault=True, tune=NUMBA_TUNE)
if has_cxx():
    event_csrmv_p.def_cuda_raw_kernel(_cpp_generator, platform="cpu", tune=CPP_TUNE)
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
