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

from ..contract.outs import as_dtype
from ..core.primitive import XLACustomKernel
from ._csr_kernels import CSR_CPP, numba_scatter_kernels
from ._support import def_cpu_kernels, def_gpu_kernels, random_csr, row_ids

__all__ = ["event_csrmv", "event_csrmv_p"]

# Compiled after CSR_CPP, which defines CsrArrays and scatter_rows.
_CPP = """
void event_csrmv(const pk::Tensor& data, const pk::Tensor& indices,
                 const pk::Tensor& indptr, const pk::Tensor& spikes, pk::Tensor& out,
                 int64_t grain) {
  const CsrArrays a(data, indices, indptr);
  const bool* s = spikes.data_ptr<bool>();
  PK_CHECK(spikes.numel() == a.rows, "event_csrmv: spikes must have n_rows entries");
  PK_CHECK(grain >= 0, "event_csrmv: grain must be >= 0 (0: serial), got " << grain);
  scatter_rows(a, out, grain, [&](float* acc, int64_t i) {
    if (!s[i]) return;
    for (int64_t j = a.ptr[i]; j < a.ptr[i + 1]; ++j) acc[a.idx[j]] += a.d[j];
  });
}
"""
#: Launch parameters tuned per device and size (``docs/tuning.md``), by backend; the
#: first of each is the default (serial: a scatter gains from threads only when large).
TUNE = {"numba": {"parallel": [False, True]}, "cuda_raw": {"grain": [0, 32768, 262144]}}


def _jax_generator(outs: Any, n_post: int, **kwargs: Any) -> Any:
    def kernel(data, indices, indptr, spikes):
        rows = row_ids(indptr, data.shape[0])
        weights = jnp.where(spikes[rows], data, jnp.zeros_like(data))
        return jax.ops.segment_sum(weights, indices, num_segments=n_post)

    return kernel


def _add_spiking_rows(acc, data, indices, indptr, spikes, lo, hi):
    # The weights of rows [lo, hi) whose presynaptic neuron spiked, added into acc.
    for i in range(lo, hi):
        if spikes[i]:
            for j in range(indptr[i], indptr[i + 1]):
                acc[np.uint64(indices[j])] += data[j]


@functools.cache
def _numba_kernels() -> dict[bool, Any]:
    return numba_scatter_kernels(_add_spiking_rows)


def _numba_generator(outs: Any, parallel: bool = False, **kwargs: Any) -> Any:
    from ..backends.numba import numba_kernel

    return numba_kernel(_numba_kernels()[bool(parallel)], outs=outs[0])


def _cpp_generator(
    outs: Any, grain: int = TUNE["cuda_raw"]["grain"][0], **kwargs: Any
) -> Any:
    from ..backends.cuda_raw import load_cpp_inline

    module = load_cpp_inline(
        "polykernel_catalog_event_csrmv", [CSR_CPP, _CPP], ["event_csrmv"]
    )
    return lambda *args: module.event_csrmv(*args, outs=outs[0], grain=int(grain))


event_csrmv_p = XLACustomKernel("polykernel.catalog.event_csrmv")
def_cpu_kernels(event_csrmv_p, _jax_generator, _numba_generator, _cpp_generator, TUNE)
def_gpu_kernels(event_csrmv_p, _jax_generator)
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
        as_dtype(data, jnp.float32),
        as_dtype(indices, jnp.int32),
        as_dtype(indptr, jnp.int32),
        as_dtype(spikes, bool),
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
