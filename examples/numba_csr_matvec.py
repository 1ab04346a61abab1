"""Sparse CSR matrix times vector: a parallel Numba kernel behind a primitive.

Checked against ``scipy.sparse``. Run: ``python examples/numba_csr_matvec.py``
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numba
import numpy as np
import scipy.sparse as sp

from polykernel import XLACustomKernel, numba_kernel


@numba.njit(parallel=True)
def csr_matvec(data, indices, indptr, x, out):
    for row in numba.prange(indptr.size - 1):  # one row per thread
        acc = out.dtype.type(0)
        for k in range(indptr[row], indptr[row + 1]):
            acc += data[k] * x[indices[k]]
        out[row] = acc


def csrmv_generator(outs, **_):
    kernel = numba_kernel(csr_matvec, outs[0])
    return lambda data, indices, indptr, x: [kernel(data, indices, indptr, x)]


csrmv = XLACustomKernel("examples.numba_csr_matvec")
csrmv.def_numba_kernel(csrmv_generator)


def main() -> None:
    n_post, n_pre = 1000, 2000
    rng = np.random.default_rng(42)
    mat = sp.random(n_post, n_pre, density=0.05, format="csr", random_state=rng,
                    dtype=np.float32)  # fmt: skip
    x = rng.random(n_pre).astype(np.float32)
    spec = jax.ShapeDtypeStruct((n_post,), jnp.float32)
    args = (mat.data, mat.indices.astype(np.int32), mat.indptr.astype(np.int32), x)

    y = csrmv(*args, outs=[spec])[0]
    np.testing.assert_allclose(y, mat @ x, rtol=1e-4, atol=1e-5)

    f = jax.jit(lambda *a: csrmv(*a, outs=[spec])[0])
    np.testing.assert_allclose(f(*args), mat @ x, rtol=1e-4, atol=1e-5)
    f(*args).block_until_ready()
    t0 = time.perf_counter()
    for _ in range(50):
        f(*args).block_until_ready()
    ms = (time.perf_counter() - t0) / 50 * 1e3
    print(f"{n_post}x{n_pre} CSR (nnz={mat.nnz}): {ms:.3f} ms per jitted call; "
          f"matches scipy.sparse")  # fmt: skip


if __name__ == "__main__":
    main()
