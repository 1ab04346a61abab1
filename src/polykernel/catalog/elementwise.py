"""``scaled_add``: ``out = alpha * x + y`` for float32 vectors — the simplest primitive.

Backends: ``jax_raw``, ``numba`` (a serial loop: memory-bound, and thread start-up
costs more than it saves at small sizes), ``cuda_raw`` on the CPU
(C++ ``-O3``), ``triton`` on the GPU, and ``pallas`` on the CPU (interpret mode, a
debugging path) and the GPU (Pallas' Triton backend; lowered and tested here,
launched only by ``make test-gpu``). Differentiable in both inputs: the tangent
rules are plain ``jnp`` expressions, so reverse mode needs no transpose rule.
Batch-partitioned: sharded inputs are not gathered.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..core.primitive import XLACustomKernel
from ._numba_cuda_kernels import scaled_add_generator
from ._support import (
    has_cxx,
    has_numba,
    has_numba_cuda,
    has_pallas,
    has_triton,
    pallas_elementwise,
)

__all__ = ["scaled_add", "scaled_add_p"]

_CPP = """
void scaled_add(const pk::Tensor& x, const pk::Tensor& y, pk::Tensor& out,
                float alpha) {
  const float* a = x.data_ptr<float>();
  const float* b = y.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = out.numel();
  PK_CHECK(x.numel() == n && y.numel() == n, "scaled_add: x, y, out sizes differ");
  // Memory-bound: split large arrays over XLA's intra-op threads, as XLA does.
  pk::parallel_for(0, n, 1 << 16, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) o[i] = alpha * a[i] + b[i];
  });
}
"""


def _jax_generator(outs: Any, alpha: float, **kwargs: Any) -> Any:
    return lambda x, y: alpha * x + y


def _numba_generator(outs: Any, alpha: float, **kwargs: Any) -> Any:
    import numba

    from ..backends.numba import numba_kernel

    scale = np.float32(alpha)

    @numba.njit
    def kernel(x, y, out):
        # Any rank: the buffers are C-contiguous, so flat views cover them.
        x, y, out = x.reshape(-1), y.reshape(-1), out.reshape(-1)
        for i in range(out.size):
            out[i] = scale * x[i] + y[i]

    return numba_kernel(kernel, outs=outs[0])


def _cpp_generator(outs: Any, alpha: float, **kwargs: Any) -> Any:
    from ..backends.cuda_raw import load_cpp_inline

    module = load_cpp_inline("polykernel_catalog_scaled_add", _CPP, ["scaled_add"])
    return lambda x, y: module.scaled_add(x, y, outs=outs[0], alpha=float(alpha))


def _triton_generator(outs: Any, alpha: float, **kwargs: Any) -> Any:
    from ._triton_kernels import scaled_add_triton  # imports triton: only here

    return scaled_add_triton(outs, alpha)


def _scaled_add_pallas(x_ref, y_ref, out_ref, *, alpha: float) -> None:
    out_ref[...] = alpha * x_ref[...] + y_ref[...]


def _pallas_generator(outs: Any, alpha: float, **kwargs: Any) -> Any:
    run = pallas_elementwise(_scaled_add_pallas, outs, n_inputs=2)
    return lambda x, y: run(x, y, alpha=np.float32(alpha))


scaled_add_p = XLACustomKernel("polykernel.catalog.scaled_add")
scaled_add_p.def_jax_raw_kernel(_jax_generator, platform="cpu")
if has_numba():
    scaled_add_p.def_numba_kernel(_numba_generator, asdefault=True)
if has_cxx():
    scaled_add_p.def_cuda_raw_kernel(_cpp_generator, platform="cpu")
if has_numba_cuda():  # registered for gpu; numba.cuda imported on first use
    scaled_add_p.def_numba_cuda_kernel(scaled_add_generator)
if has_triton():
    scaled_add_p.def_triton_kernel(_triton_generator)
if has_pallas():
    scaled_add_p.def_pallas_kernel("cpu", _pallas_generator)
    scaled_add_p.def_pallas_kernel("gpu", _pallas_generator)
# Registered last, so a GPU kernel stays the default: the GPU benchmarks' reference.
scaled_add_p.def_jax_raw_kernel(_jax_generator, platform="gpu")
scaled_add_p.def_tags("elementwise", "float")


def scaled_add(
    x: Any, y: Any, *, alpha: float = 1.0, backend: str | None = None
) -> jax.Array:
    """Return ``alpha * x + y`` through the ``scaled_add`` primitive.

    Example:
        >>> import jax.numpy as jnp
        >>> from polykernel.catalog import scaled_add
        >>> scaled_add(jnp.ones(3), jnp.ones(3), alpha=2.0, backend="jax_raw").tolist()
        [3.0, 3.0, 3.0]
    """
    x = jnp.asarray(x, jnp.float32)
    y = jnp.asarray(y, jnp.float32)
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return scaled_add_p(x, y, outs=spec, alpha=float(alpha), backend=backend)


def _benchmark_data(*, platform: str) -> list[Any]:
    from ..benchmark import BenchmarkConfig

    rng = np.random.default_rng(0)
    configs = []
    for n in (1_000, 1_000_000):
        x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
        configs.append(
            BenchmarkConfig(
                f"n={n:.0e}", (x, y), {"alpha": 2.0}, {"n": n}, work=(12.0 * n, "B")
            )
        )
    return configs


scaled_add_p.def_jvp_rule2(
    lambda t, x, y, *, alpha, **kw: [alpha * t],
    lambda t, x, y, **kw: [t],
)
scaled_add_p.def_call(scaled_add)
scaled_add_p.def_batch_partitioning()
scaled_add_p.def_benchmark_data(_benchmark_data)
