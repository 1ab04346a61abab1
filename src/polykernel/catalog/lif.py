"""``lif_step``: one Euler step of leaky integrate-and-fire neurons.

``v' = v + dt * (-(v - v_rest) * tau_inv + i_ext)``; neurons with ``v' >= v_th`` spike
and are reset to ``v_rest``. Returns ``(v_next, spikes)`` with boolean spikes, ready
to feed :func:`polykernel.catalog.event_csrmv`. Parameters are static floats.
Backends: ``jax_raw``, ``numba``, ``cuda_raw`` on the CPU, and ``pallas`` on the CPU
(interpret mode) and the GPU (Triton; lowered here, launched only on a GPU).
Batch-partitioned: sharded inputs are not gathered.
"""

from __future__ import annotations

import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..contract.outs import as_dtype
from ..core.primitive import XLACustomKernel
from ._support import def_cpu_kernels, def_gpu_kernels, pallas_elementwise

__all__ = ["lif_step", "lif_step_p"]

_CPP = """
void lif_step(const pk::Tensor& v, const pk::Tensor& i_ext, pk::Tensor& v_next,
              pk::Tensor& spikes, float tau_inv, float v_th, float v_rest, float dt) {
  const float* vv = v.data_ptr<float>();
  const float* ii = i_ext.data_ptr<float>();
  float* vn = v_next.data_ptr<float>();
  bool* sp = spikes.data_ptr<bool>();
  const int64_t n = v.numel();
  PK_CHECK(i_ext.numel() == n, "lif_step: v and i_ext sizes differ");
  pk::parallel_for(0, n, 1 << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      const float candidate = vv[k] + dt * (-(vv[k] - v_rest) * tau_inv + ii[k]);
      const bool fired = candidate >= v_th;
      sp[k] = fired;
      vn[k] = fired ? v_rest : candidate;
    }
  });
}
"""

_PARAMS = ("tau_inv", "v_th", "v_rest", "dt")


def _jax_generator(
    outs: Any, tau_inv: float, v_th: float, v_rest: float, dt: float, **kwargs: Any
) -> Any:
    def kernel(v, i_ext):
        candidate = v + dt * (-(v - v_rest) * tau_inv + i_ext)
        fired = candidate >= v_th
        return jnp.where(fired, jnp.float32(v_rest), candidate), fired

    return kernel


def _numba_generator(
    outs: Any, tau_inv: float, v_th: float, v_rest: float, dt: float, **kwargs: Any
) -> Any:
    import numba

    from ..backends.numba import numba_kernel

    ti, th, vr, step = (np.float32(x) for x in (tau_inv, v_th, v_rest, dt))

    @numba.njit
    def kernel(v, i_ext, v_next, spikes):
        # Any rank: the buffers are C-contiguous, so flat views cover them.
        v, i_ext = v.reshape(-1), i_ext.reshape(-1)
        v_next, spikes = v_next.reshape(-1), spikes.reshape(-1)
        for k in range(v.size):
            candidate = v[k] + step * (-(v[k] - vr) * ti + i_ext[k])
            fired = candidate >= th
            spikes[k] = fired
            v_next[k] = vr if fired else candidate

    return numba_kernel(kernel, outs=list(outs))


def _cpp_generator(outs: Any, **params: Any) -> Any:
    from ..backends.cuda_raw import load_cpp_inline

    module = load_cpp_inline("polykernel_catalog_lif", _CPP, ["lif_step"])
    attrs = {k: float(params[k]) for k in _PARAMS}
    return lambda v, i_ext: module.lif_step(v, i_ext, outs=list(outs), **attrs)


def _lif_step_pallas(v_ref, i_ref, v_next_ref, spikes_ref, **params: float) -> None:
    v = v_ref[...]
    rest = np.float32(params["v_rest"])
    candidate = v + params["dt"] * (-(v - rest) * params["tau_inv"] + i_ref[...])
    fired = candidate >= params["v_th"]
    spikes_ref[...] = fired
    v_next_ref[...] = jnp.where(fired, rest, candidate)


def _pallas_generator(outs: Any, **params: Any) -> Any:
    run = pallas_elementwise(_lif_step_pallas, outs, n_inputs=2)
    attrs = {k: np.float32(params[k]) for k in _PARAMS}
    return lambda v, i_ext: run(v, i_ext, **attrs)


lif_step_p = XLACustomKernel("polykernel.catalog.lif_step")
def_cpu_kernels(lif_step_p, _jax_generator, _numba_generator, _cpp_generator)
def_gpu_kernels(lif_step_p, _jax_generator, pallas=_pallas_generator)
lif_step_p.def_tags("neuron", "float")


def lif_step(
    v: Any,
    i_ext: Any,
    *,
    tau_inv: float = 0.05,
    v_th: float = -55.0,
    v_rest: float = -70.0,
    dt: float = 0.1,
    backend: str | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Advance membrane potentials ``v`` by one step; return ``(v_next, spikes)``.

    Example:
        >>> import jax.numpy as jnp
        >>> from polykernel.catalog import lif_step
        >>> v, s = lif_step(jnp.array([-56.0, -60.0]), jnp.array([20.0, 0.0]),
        ...                 backend="jax_raw")
        >>> s.tolist()
        [True, False]
    """
    v = as_dtype(v, jnp.float32)
    i_ext = as_dtype(i_ext, jnp.float32)
    outs = (
        jax.ShapeDtypeStruct(v.shape, jnp.float32),
        jax.ShapeDtypeStruct(v.shape, jnp.bool_),
    )
    return lif_step_p(
        v,
        i_ext,
        outs=outs,
        tau_inv=float(tau_inv),
        v_th=float(v_th),
        v_rest=float(v_rest),
        dt=float(dt),
        backend=backend,
    )


def _clear_of_threshold(v: np.ndarray, i_ext: np.ndarray) -> np.ndarray:
    """``i_ext`` nudged so that no neuron lands within 1e-3 of the threshold.

    A neuron that lands there spikes or not depending on the last bit of float32
    rounding (an FMA on the GPU, none on the CPU): the benchmark's cross-backend
    comparison would report a mismatch that is no bug. Uses :func:`lif_step`'s
    default parameters, as the benchmark does.
    """
    p = {k: q.default for k, q in inspect.signature(lif_step).parameters.items()}
    v64 = v.astype(np.float64)
    candidate = v64 + p["dt"] * (-(v64 - p["v_rest"]) * p["tau_inv"] + i_ext)
    close = np.abs(candidate - p["v_th"]) < 1e-3
    return np.where(close, i_ext + np.float32(0.05), i_ext).astype(np.float32)


def _benchmark_data(*, platform: str) -> list[Any]:
    from ..benchmark import BenchmarkConfig

    rng = np.random.default_rng(5)
    configs = []
    for n in (5_000, 1_000_000):
        v = rng.uniform(-75.0, -50.0, n).astype(np.float32)
        i_ext = _clear_of_threshold(v, rng.uniform(0.0, 5.0, n).astype(np.float32))
        configs.append(
            BenchmarkConfig(f"n={n}", (v, i_ext), {}, {"n": n}, work=(13.0 * n, "B"))
        )
    return configs


lif_step_p.def_call(lif_step)
lif_step_p.def_batch_partitioning()
lif_step_p.def_benchmark_data(_benchmark_data)
