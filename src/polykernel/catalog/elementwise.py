"""``scaled_add``: ``out = alpha * x + y`` for float32 vectors — the simplest primitive.

Backends: ``jax_raw``, ``numba`` (a loop, serial or ``prange``-parallel: a tuned
launch parameter, since thread start-up costs more than it saves at small sizes),
``cuda_raw`` on the CPU (C++ ``-O3``, split over XLA's threads in pieces of a tuned
``grain``, or serial), ``triton`` on the GPU, and ``pallas`` on the CPU (interpret
mode, a debugging path) and the GPU (Pallas' Triton backend; lowered and tested here,
launched only by ``make test-gpu``). Differentiable in both inputs: the tangent
rules are plain ``jnp`` expressions, so reverse mode needs no transpose rule.
Batch-partitioned: sharded inputs are not gathered.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..contract.outs import as_dtype
from ..core.primitive import XLACustomKernel
from ._numba_cuda_kernels import scaled_add_generator
from ._support import def_cpu_kernels, def_gpu_kernels, pallas_elementwise

__all__ = ["scaled_add", "scaled_add_p"]

_CPP = """
void scaled_add(const pk::Tensor& x, const pk::Tensor& y, pk::Tensor& out,
                float alpha, int64_t grain) {
  const float* a = x.data_ptr<float>();
  const float* b = y.data_ptr<float>();
  float* o = out.data_ptr<float>();
  const int64_t n = out.numel();
  PK_CHECK(x.numel() == n && y.numel() == n, "scaled_add: x, y, out sizes differ");
  PK_CHECK(grain >= 0, "scaled_add: grain must be >= 0 (0: serial), got " << grain);
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) o[i] = alpha * a[i] + b[i];
  };
  // Memory-bound: split large arrays over XLA's intra-op threads in pieces of
  // `grain` elements (a tuned launch parameter), or run serially (grain 0).
  if (grain == 0) body(0, n); else pk::parallel_for(0, n, grain, body);
}
"""
#: Launch parameters tuned per device and size (``docs/tuning.md``), by backend; the
#: first of each is the default (Pallas': on the GPU).
TUNE = {
    "numba": {"parallel": [False, True]},
    "cuda_raw": {"grain": [1 << 16, 0, 1 << 14, 1 << 18]},
    "triton": {"BLOCK": [1024, 256, 4096], "num_warps": [4, 8]},
    "numba_cuda": {"threads_per_block": [256, 128, 512]},
    "pallas": {"block": [1024, 512, 2048]},
}


def _jax_generator(outs: Any, alpha: float, **kwargs: Any) -> Any:
    return lambda x, y: alpha * x + y


@functools.cache
def _numba_kernels() -> dict[bool, Any]:
    import numba

    def body(x, y, out, alpha):
        # Any rank: the buffers are C-contiguous, so flat views cover them.
        x, y, out = x.reshape(-1), y.reshape(-1), out.reshape(-1)
        a = np.float32(alpha)
        for i in numba.prange(out.size):
            out[i] = a * x[i] + y[i]

    # prange is a plain range unless compiled with parallel=True.
    return {p: numba.njit(parallel=p)(body) for p in (False, True)}


def _numba_generator(outs: Any, alpha: float, parallel: bool = False, **kw: Any) -> Any:
    from ..backends.numba import numba_kernel

    kernel = numba_kernel(_numba_kernels()[bool(parallel)], outs=outs[0])
    return lambda x, y: kernel(x, y, alpha=np.float32(alpha))


def _cpp_generator(
    outs: Any, alpha: float, grain: int = TUNE["cuda_raw"]["grain"][0], **kwargs: Any
) -> Any:
    from ..backends.cuda_raw import load_cpp_inline

    module = load_cpp_inline("polykernel_catalog_scaled_add", _CPP, ["scaled_add"])
    return lambda x, y: module.scaled_add(
        x, y, outs=outs[0], alpha=float(alpha), grain=int(grain)
    )


def _triton_generator(
    outs: Any, alpha: float, BLOCK: int = 1024, num_warps: int = 4, **kwargs: Any
) -> Any:
    from ._triton_kernels import scaled_add_triton  # imports triton: only here

    return scaled_add_triton(outs, alpha, BLOCK, num_warps)


def _scaled_add_pallas(x_ref, y_ref, out_ref, *, alpha: float) -> None:
    out_ref[...] = alpha * x_ref[...] + y_ref[...]


def _pallas_generator(outs: Any, alpha: float, block: int = 1024, **kw: Any) -> Any:
    run = pallas_elementwise(_scaled_add_pallas, outs, n_inputs=2, block=block)
    return lambda x, y: run(x, y, alpha=np.float32(alpha))


scaled_add_p = XLACustomKernel("polykernel.catalog.scaled_add")
def_cpu_kernels(scaled_add_p, _jax_generator, _numba_generator, _cpp_generator, TUNE)
def_gpu_kernels(
    scaled_add_p,
    _jax_generator,
    TUNE,
    numba_cuda=scaled_add_generator,
    triton=_triton_generator,
    pallas=_pallas_generator,
)
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
    x = as_dtype(x, jnp.float32)
    y = as_dtype(y, jnp.float32)
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
