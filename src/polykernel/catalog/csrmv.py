"""``csrmv``: sparse CSR matrix times dense vector, with its transpose and JVP.

``y = A @ v`` (``transpose=False``, ``y`` has ``n_rows`` entries) or ``y = A.T @ v``
(``transpose=True``), where ``A`` is given by ``(data, indices, indptr)`` with int32
indices. The primitive is linear in ``data`` and in ``v``: JVPs are written with the
primitive itself and the transpose rule swaps ``transpose``, so ``jax.grad`` works for
both. Column indices must lie in ``[0, n_cols)`` (checked by ``scipy.sparse`` style
constructors, not per call).

Sharded over a mesh it partitions by row blocks (``docs/sharding.md``): each shard
gets a window of ``indptr`` (absolute offsets into the whole ``data`` and ``indices``),
which the native kernels read directly and ``jax_raw`` reads with ``row_window=True``.

The Numba and C++ kernels cast indices to unsigned before indexing: that removes
Python-style negative-index handling from the inner loop (1.6x faster here) and keeps
two partial sums to shorten the floating-point dependency chain. Serial or parallel
is a tuned launch parameter (``docs/tuning.md``): Numba's ``parallel`` (``prange``),
C++'s ``grain`` (stored entries per piece of ``pk::parallel_for``; 0 is serial). The
parallel scatter (``A.T @ v``) gives each thread a private copy of the output, since
two rows may add into the same entry, and sums the copies in a fixed order (written
once, for ``event_csrmv`` too, in ``_csr_kernels.py``).
On the GPU, ``triton`` gathers one row per program (the transpose gathers over a CSC
copy built with ``jnp``: no atomics, deterministic sums).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._jax_compat import Zero, is_undefined_primal
from ..contract.outs import as_dtype
from ..core.primitive import XLACustomKernel
from ._csr_kernels import CSR_CPP, numba_scatter_kernels
from ._numba_cuda_kernels import csrmv_generator
from ._support import (
    def_cpu_kernels,
    def_gpu_kernels,
    random_csr,
    row_ids,
    window_row_ids,
)

__all__ = ["csrmv", "csrmv_p"]

# Compiled after CSR_CPP, which defines CsrArrays and scatter_rows.
_CPP = """
// Row i of A @ v, with two partial sums (a shorter floating-point dependency chain).
static inline float csr_row(const CsrArrays& a, const float* x, int64_t i) {
  const float* d = a.d;
  const uint32_t* idx = a.idx;
  int64_t j = a.ptr[i];
  const int64_t end = a.ptr[i + 1];
  float a0 = 0.f, a1 = 0.f;
  for (; j + 1 < end; j += 2) {
    a0 += d[j] * x[idx[j]];
    a1 += d[j + 1] * x[idx[j + 1]];
  }
  if (j < end) a0 += d[j] * x[idx[j]];
  return a0 + a1;
}
void csrmv_gather(const pk::Tensor& data, const pk::Tensor& indices,
                  const pk::Tensor& indptr, const pk::Tensor& v, pk::Tensor& out,
                  int64_t grain) {
  const CsrArrays a(data, indices, indptr);
  const float* x = v.data_ptr<float>();
  float* y = out.data_ptr<float>();
  const int64_t rows = out.numel();
  PK_CHECK(indptr.numel() == rows + 1, "csrmv: indptr must have n_rows + 1 entries");
  PK_CHECK(grain >= 0, "csrmv: grain must be >= 0 (0: serial), got " << grain);
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = csr_row(a, x, i);
  };
  if (grain == 0) { body(0, rows); return; }
  // Rows are independent: split them over XLA's intra-op threads, about `grain`
  // stored entries a piece (a tuned launch parameter).
  const int64_t per_row = rows > 0 ? a.ptr[rows] / rows + 1 : 1;
  pk::parallel_for(0, rows, grain / per_row + 1, body);
}
void csrmv_scatter(const pk::Tensor& data, const pk::Tensor& indices,
                   const pk::Tensor& indptr, const pk::Tensor& v, pk::Tensor& out,
                   int64_t grain) {
  const CsrArrays a(data, indices, indptr);
  const float* x = v.data_ptr<float>();
  PK_CHECK(grain >= 0, "csrmv: grain must be >= 0 (0: serial), got " << grain);
  scatter_rows(a, out, grain, [&](float* acc, int64_t i) {
    const float xi = x[i];
    for (int64_t j = a.ptr[i]; j < a.ptr[i + 1]; ++j) acc[a.idx[j]] += a.d[j] * xi;
  });
}
"""
#: Launch parameters tuned per device and size (``docs/tuning.md``), by backend; the
#: first of each is the default.
TUNE = {
    "numba": {"parallel": [False, True]},
    "cuda_raw": {"grain": [32768, 0, 4096, 262144]},
    "triton": {"BLOCK": [32, 16, 64], "num_warps": [1, 2]},
    "numba_cuda": {"threads_per_block": [256, 128, 512]},
}


def _jax_generator(
    outs: Any, shape: tuple[int, int], transpose: bool, row_window=False, **kw: Any
) -> Any:
    def kernel(data, indices, indptr, v):
        if row_window:  # indptr holds absolute offsets of a block of rows
            rows, inside = window_row_ids(indptr, data.shape[0])
            data = jnp.where(inside, data, jnp.zeros_like(data))
        else:
            rows = row_ids(indptr, data.shape[0])
        if transpose:
            return jax.ops.segment_sum(data * v[rows], indices, num_segments=shape[1])
        return jax.ops.segment_sum(data * v[indices], rows, num_segments=shape[0])

    return kernel


def _add_weighted_rows(acc, data, indices, indptr, v, lo, hi):
    # Rows [lo, hi) of A, each times its entry of v, added into acc (A.T @ v).
    for i in range(lo, hi):
        vi = v[i]
        for j in range(indptr[i], indptr[i + 1]):
            acc[np.uint64(indices[j])] += data[j] * vi


@functools.cache
def _numba_kernels() -> dict[tuple[bool, bool], Any]:
    import numba

    def gather(data, indices, indptr, v, out):
        one = np.uint64(1)
        for i in numba.prange(out.size):
            a0 = np.float32(0)
            a1 = np.float32(0)
            j = np.uint64(indptr[i])
            end = np.uint64(indptr[i + 1])
            while j + one < end:
                a0 += data[j] * v[np.uint64(indices[j])]
                a1 += data[j + one] * v[np.uint64(indices[j + one])]
                j += np.uint64(2)
            if j < end:
                a0 += data[j] * v[np.uint64(indices[j])]
            out[i] = a0 + a1

    scatter = numba_scatter_kernels(_add_weighted_rows)
    jit = numba.njit
    return {(False, False): jit(gather), (False, True): jit(parallel=True)(gather),
            (True, False): scatter[False], (True, True): scatter[True]}  # fmt: skip


def _numba_generator(
    outs: Any, transpose: bool, parallel: bool = False, **kwargs: Any
) -> Any:
    from ..backends.numba import numba_kernel

    return numba_kernel(_numba_kernels()[bool(transpose), bool(parallel)], outs=outs[0])


def _cpp_generator(
    outs: Any, transpose: bool, grain: int = TUNE["cuda_raw"]["grain"][0], **kwargs: Any
) -> Any:
    from ..backends.cuda_raw import load_cpp_inline

    module = load_cpp_inline(
        "polykernel_catalog_csrmv", [CSR_CPP, _CPP], ["csrmv_gather", "csrmv_scatter"]
    )
    fn = module.csrmv_scatter if transpose else module.csrmv_gather
    return lambda data, indices, indptr, v: fn(data, indices, indptr, v, outs=outs[0],
                                               grain=int(grain))  # fmt: skip


def _triton_generator(
    outs: Any, shape: tuple[int, int], transpose: bool, row_window=False,
    BLOCK: int = 32, num_warps: int = 1, **kw: Any,
) -> Any:  # fmt: skip
    from ._triton_kernels import csrmv_triton  # imports triton: only here

    return csrmv_triton(outs, shape, transpose, row_window, BLOCK, num_warps)


csrmv_p = XLACustomKernel("polykernel.catalog.csrmv")
def_cpu_kernels(csrmv_p, _jax_generator, _numba_generator, _cpp_generator, TUNE)
def_gpu_kernels(
    csrmv_p, _jax_generator, TUNE, numba_cuda=csrmv_generator, triton=_triton_generator
)
csrmv_p.def_tags("csr", "float", "mv")


def csrmv(
    data: Any,
    indices: Any,
    indptr: Any,
    v: Any,
    *,
    shape: tuple[int, int],
    transpose: bool = False,
    backend: str | None = None,
) -> jax.Array:
    """Multiply the CSR matrix ``(data, indices, indptr)`` of ``shape`` by ``v``.

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> from polykernel.catalog import csrmv
        >>> A = sp.random(5, 4, density=0.5, format="csr", dtype=np.float32,
        ...               random_state=0)
        >>> v = np.ones(4, np.float32)
        >>> y = csrmv(A.data, A.indices, A.indptr, v, shape=A.shape, backend="jax_raw")
        >>> bool(np.allclose(y, A @ v, rtol=1e-5))
        True
    """
    n_out = shape[1] if transpose else shape[0]
    spec = jax.ShapeDtypeStruct((n_out,), jnp.float32)
    return csrmv_p(
        as_dtype(data, jnp.float32),
        as_dtype(indices, jnp.int32),
        as_dtype(indptr, jnp.int32),
        as_dtype(v, jnp.float32),
        outs=spec,
        shape=tuple(shape),
        transpose=bool(transpose),
        backend=backend,
    )


def _call_like(params: dict[str, Any], data, indices, indptr, v, transpose) -> Any:
    n_out = params["shape"][1] if transpose else params["shape"][0]
    spec = jax.ShapeDtypeStruct((n_out,), jnp.float32)
    new = dict(params, outs=(spec,), transpose=transpose)
    return csrmv_p.primitive.bind(data, indices, indptr, v, **new)[0]


def _jvp_data(t, data, indices, indptr, v, **params):
    return [_call_like(params, t, indices, indptr, v, params["transpose"])]


def _jvp_vector(t, data, indices, indptr, v, **params):
    return [_call_like(params, data, indices, indptr, t, params["transpose"])]


def _transpose(cts, data, indices, indptr, v, **params):
    (ct,) = cts
    if type(ct) is Zero:
        return None, None, None, None
    transpose = params["transpose"]
    if is_undefined_primal(v):
        return (
            None,
            None,
            None,
            _call_like(params, data, indices, indptr, ct, not transpose),
        )
    if is_undefined_primal(data):
        rows = row_ids(indptr, data.aval.shape[0])
        ct_data = ct[indices] * v[rows] if transpose else ct[rows] * v[indices]
        return ct_data, None, None, None
    raise ValueError("csrmv transpose: neither data nor v is the linear input")


def _benchmark_data(*, platform: str) -> list[Any]:
    from ..benchmark import BenchmarkConfig

    configs = []
    for n_rows, n_cols, p in ((1000, 1000, 0.1), (20000, 10000, 0.05)):
        data, indices, indptr = random_csr(n_rows, n_cols, p, seed=1)
        rng = np.random.default_rng(2)
        for transpose in (False, True):
            v = rng.random(n_rows if transpose else n_cols).astype(np.float32)
            name = f"{n_rows}x{n_cols},p={p}" + (",T" if transpose else "")
            configs.append(
                BenchmarkConfig(
                    name,
                    (data, indices, indptr, v),
                    {"shape": (n_rows, n_cols), "transpose": transpose},
                    {"n_rows": n_rows, "n_cols": n_cols, "p": p, "nnz": int(data.size)},
                    work=(8.0 * data.size, "B"),
                )
            )
    return configs


def _sharding_rule(ins: Any, outs: Any, *, transpose: bool, **params: Any) -> str:
    # Factors: nnz (data, indices), ptr (indptr), row / col (the vector and output).
    return "nnz, nnz, ptr, row -> col" if transpose else "nnz, nnz, ptr, col -> row"


def _row_block(indptr: Any, block: Any, n_blocks: int, rows_per_block: int) -> Any:
    """``indptr`` of rows ``[block * m, (block + 1) * m)``: absolute offsets.

    The last block of an uneven split runs past ``n_rows``; it gets empty rows.
    """
    pad = n_blocks * rows_per_block - (indptr.shape[0] - 1)
    padded = jnp.concatenate([indptr, jnp.full((pad,), indptr[-1], indptr.dtype)])
    start = (block * rows_per_block).astype(jnp.int32)
    return jax.lax.dynamic_slice(padded, (start,), (rows_per_block + 1,))


def _partition_rows(
    shard, data, indices, indptr, v, *, outs, shape, transpose, **params
) -> Any:
    """Compute one block of rows of ``A`` on each shard.

    ``A @ v``: the output's row blocks are split, ``v`` and the matrix are whole.
    ``A.T @ v``: ``v``'s row blocks are split, each shard sums its rows' share of
    the output, and the shares are added across shards (one all-reduce).
    """
    axes = shard.in_axes(3) if transpose else shard.out_axes(0)
    n_local = v.shape[0] if transpose else outs[0].shape[0]
    window = _row_block(indptr, shard.index(axes), shard.count(axes), n_local)
    (y,) = shard.call(
        data, indices, window, v, shape=(n_local, shape[1]), row_window=True
    )
    return jax.lax.psum(y, axes) if transpose and axes else y


csrmv_p.def_jvp_rule2(_jvp_data, None, None, _jvp_vector)
csrmv_p.def_transpose_rule(_transpose)
csrmv_p.def_sharding_rule(
    _sharding_rule, _partition_rows, need_replication=("nnz", "ptr", "col")
)
csrmv_p.def_call(csrmv)
csrmv_p.def_benchmark_data(_benchmark_data)
