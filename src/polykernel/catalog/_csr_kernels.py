"""The CSR scatter that ``csrmv`` (``A.T @ v``) and ``event_csrmv`` run on the CPU.

A scatter adds every row ``i`` of a CSR matrix into the output entries its column
indices name, so two rows may add into one entry. Run in parallel, each piece of
rows adds into a private copy of the output and the copies are summed in piece
order: no atomics, and the same sums on every run. Only the update of one row
differs between the two primitives; it is passed in (a C++ lambda, a Python
function that Numba compiles), and the pieces, copies and sums are written once here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CSR_CPP", "numba_scatter_kernels"]

#: C++ shared by the catalog's CSR kernels: ``CsrArrays`` and ``scatter_rows``.
CSR_CPP = """
#include <algorithm>
#include <cstdint>
#include <vector>
// The arrays of a CSR matrix. Column indices are read as unsigned: that removes
// negative-index handling from the inner loops.
struct CsrArrays {
  const float* d;
  const uint32_t* idx;
  const int32_t* ptr;
  int64_t rows;
  CsrArrays(const pk::Tensor& data, const pk::Tensor& indices, const pk::Tensor& indptr)
      : d(data.data_ptr<float>()),
        idx(reinterpret_cast<const uint32_t*>(indices.data_ptr<int32_t>())),
        ptr(indptr.data_ptr<int32_t>()),
        rows(indptr.numel() - 1) {}
};
// out = the sum over the rows i of `a` of add_row(acc, i), which adds row i into acc.
// grain is about how many stored entries make a piece (0: serial, one piece).
template <class AddRow>
void scatter_rows(const CsrArrays& a, pk::Tensor& out, int64_t grain, AddRow add_row) {
  float* y = out.data_ptr<float>();
  const int64_t rows = a.rows, n = out.numel();
  auto scatter = [&](float* acc, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) add_row(acc, i);
  };
  const int64_t pieces = grain == 0 ? 1 : std::min<int64_t>(
      pk::num_threads(), rows > 0 ? (a.ptr[rows] + grain - 1) / grain : 1);
  for (int64_t k = 0; k < n; ++k) y[k] = 0.f;
  if (pieces <= 1) { scatter(y, 0, rows); return; }
  // Two rows may add into one entry: each piece scatters its rows into a private
  // copy of y, and the copies are summed in piece order (deterministic).
  std::vector<float> partial(static_cast<size_t>(pieces) * n, 0.f);
  const int64_t chunk = (rows + pieces - 1) / pieces;
  pk::parallel_for(0, pieces, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t p = lo; p < hi; ++p)
      scatter(partial.data() + p * n, p * chunk, std::min(rows, (p + 1) * chunk));
  });
  pk::parallel_for(0, n, 1 << 14, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      float s = 0.f;
      for (int64_t p = 0; p < pieces; ++p) s += partial[p * n + k];
      y[k] = s;
    }
  });
}
"""


def numba_scatter_kernels(add_rows: Any) -> dict[bool, Any]:
    """Numba kernels ``(data, indices, indptr, x, out)``, serial and parallel (True).

    Both zero ``out`` and call ``add_rows(acc, data, indices, indptr, x, lo, hi)``
    to add rows ``[lo, hi)`` into ``acc``: ``out`` itself, or one private copy per
    thread. The rows are those both ``indptr`` and ``x`` cover (the same for valid
    input). ``add_rows`` takes a range rather than one row: arrays passed per row
    cost reference counting per row (twice as slow, measured).
    """
    import numba

    add: Any = numba.njit(add_rows)  # a Numba dispatcher (untyped for pyright)

    def serial(data, indices, indptr, x, out):
        out[:] = 0
        add(out, data, indices, indptr, x, 0, min(indptr.size - 1, x.size))

    def parallel(data, indices, indptr, x, out):
        # Two rows may add into one entry: each thread's rows go to a private copy.
        pieces = numba.get_num_threads()
        rows = min(indptr.size - 1, x.size)
        chunk = (rows + pieces - 1) // pieces
        partial = np.zeros((pieces, out.size), np.float32)
        for p in numba.prange(pieces):
            lo, hi = p * chunk, min(rows, (p + 1) * chunk)
            add(partial[p], data, indices, indptr, x, lo, hi)
        for k in numba.prange(out.size):
            s = np.float32(0)
            for p in range(pieces):
                s += partial[p, k]
            out[k] = s

    return {False: numba.njit(serial), True: numba.njit(parallel=True)(parallel)}
