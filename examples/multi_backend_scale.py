"""One primitive, every technology: Numba, Warp and Pallas (and a pure-JAX reference).

The reference tutorial's "combining CPU and GPU backends" scenario, generalised: a
``scale`` primitive (``out = x * s[0]``) gets

- a Numba kernel (``def_numba_kernel``: the CPU default, registered first);
- a Warp kernel typed from the call's ``outs`` with ``jaxinfo_to_warpinfo``, for the
  CPU (``def_kernel("warp", "cpu", ...)``: Warp's CPU code called from a native FFI
  handler) and the GPU (``def_warp_kernel``: Warp's ahead-of-time CUDA build);
- a Pallas kernel for the CPU (``def_pallas_kernel("cpu", ...)``: interpret mode) and
  the GPU (``def_pallas_kernel("gpu", ...)``);
- a ``jax_raw`` reference.

JAX picks the platform from where the arrays live; ``backend=`` picks the kernel.
Here (CPU) every CPU backend runs and all of them must agree, eagerly, under ``jit``
and ``vmap``, and ``grad`` goes through the primitive's JVP rule. The GPU backends
are registered the same way and run where JAX sees a GPU.
Run: ``python examples/multi_backend_scale.py``
"""

# No `from __future__ import annotations` here: Warp reads the kernel's annotations,
# which name the types built inside the generator (`t`, `s_type`).
import jax
import jax.numpy as jnp
import numba
import numpy as np

import polykernel as pk

try:  # Warp is optional: without it the other backends still run.
    import warp

    warp.config.quiet = True
    WARP_AVAILABLE = True
except ImportError:
    WARP_AVAILABLE = False


# -- Numba (CPU) ---------------------------------------------------------------------
@numba.njit(parallel=True)
def scale_numba(x, s, out):
    for i in numba.prange(out.size):
        out[i] = x[i] * s[0]


def numba_generator(outs, **kwargs):
    kernel = pk.numba_kernel(scale_numba, outs=outs[0])
    return lambda x, s: [kernel(x, s)]


# -- Warp (CPU and GPU: one generator) -----------------------------------------------
def warp_generator(outs, **kwargs):
    out_info = outs[0]
    t = pk.jaxinfo_to_warpinfo(out_info)  # a Warp array type: dtype and ndim of out
    s_type = warp.array(dtype=t.dtype, ndim=1)

    @warp.kernel
    def scale_warp(x: t, s: s_type, out: t):
        i = warp.tid()
        out[i] = x[i] * s[0]

    kernel = pk.warp_kernel(scale_warp, outs=out_info, launch_dims=out_info.shape)
    return lambda x, s: [kernel(x, s)]


# -- Pallas (CPU interpret mode, GPU) ------------------------------------------------
def scale_pallas(x_ref, s_ref, out_ref):
    out_ref[...] = x_ref[...] * s_ref[0]


def pallas_generator(outs, **kwargs):
    kernel = pk.pallas_kernel(scale_pallas, outs[0])
    return lambda x, s: [kernel(x, s)]


# -- the primitive ------------------------------------------------------------------
scale_op = pk.XLACustomKernel("examples.multi_backend_scale")
scale_op.def_numba_kernel(numba_generator)  # cpu default (registered first)
if WARP_AVAILABLE:
    scale_op.def_kernel("warp", "cpu", warp_generator)
    scale_op.def_warp_kernel(warp_generator)  # gpu
scale_op.def_pallas_kernel("cpu", pallas_generator)
scale_op.def_pallas_kernel("gpu", pallas_generator)
scale_op.def_jax_raw_kernel(lambda outs, **kw: lambda x, s: [x * s[0]])


def scale(x, s, backend=None):
    outs = [jax.ShapeDtypeStruct(x.shape, x.dtype)]
    return scale_op(x, s, outs=outs, backend=backend)[0]


# out = x * s[0]: d out = dx * s[0] + x * ds[0], written in JAX so it transposes.
scale_op.def_jvp_rule2(
    lambda tx, x, s, **kw: [tx * s[0]],
    lambda ts, x, s, **kw: [x * ts[0]],
)


def main() -> None:
    n = 256
    x = jnp.arange(n, dtype=jnp.float32)
    s = jnp.array([3.14], dtype=jnp.float32)
    expected = np.arange(n, dtype=np.float32) * np.float32(3.14)
    backends = scale_op.available_backends("cpu")
    gpu_backends = scale_op.available_backends("gpu")
    print("cpu backends:", backends, "| gpu backends:", gpu_backends)
    assert backends[0] == "numba" and "pallas" in backends and "jax_raw" in backends
    assert ("warp" in backends) == WARP_AVAILABLE

    jitted = jax.jit(scale, static_argnames="backend")
    batch = jnp.stack([x, 2 * x, x - 1])
    for backend in backends:
        np.testing.assert_allclose(scale(x, s, backend), expected, rtol=1e-6)
        np.testing.assert_allclose(jitted(x, s, backend), expected, rtol=1e-6)
        by_rows = jax.vmap(lambda row, b=backend: scale(row, s, b))(batch)
        np.testing.assert_allclose(by_rows, np.asarray(batch) * np.float32(3.14),
                                   rtol=1e-6)  # fmt: skip
        print(f"  {backend:<8} agrees with x * s (eager, jit, vmap)")

    # d/ds sum(x * s[0]) = sum(x), through the primitive's JVP rule (default backend).
    grad_s = jax.grad(lambda s_: scale(x, s_).sum())(s)
    np.testing.assert_allclose(grad_s, [float(np.sum(np.arange(n)))], rtol=1e-6)
    print(f"grad wrt s: {float(grad_s[0]):.1f} (= sum(x))")


if __name__ == "__main__":
    main()
