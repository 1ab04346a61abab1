"""A Warp kernel as a JAX primitive: one Jacobi sweep of a 2-D heat stencil.

``pk.warp_kernel`` wraps a ``@wp.kernel``: its array parameters take the inputs,
then the outputs (written in place); a scalar parameter takes the call's keyword of
the same name. On the CPU (here) Warp's compiled CPU code is called from a native
XLA FFI handler, with no Python per call; on a GPU the same generator runs Warp's
ahead-of-time CUDA build through polykernel's native launcher (built, never
launched here: see docs/warp.md). A ``jax_raw`` reference and a JVP rule complete
the primitive; ``jax.vmap`` runs a batch of grids in one call.
Run: ``python examples/warp_jacobi.py``
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import warp as wp

import polykernel as pk


@wp.kernel
def jacobi(u: wp.array2d(dtype=wp.float32), alpha: wp.float32,
           u_next: wp.array2d(dtype=wp.float32),
           change: wp.array2d(dtype=wp.float32)):  # fmt: skip
    i, j = wp.tid()  # launched over the whole grid; the border stays fixed
    n, m = u.shape[0], u.shape[1]
    new = u[i, j]
    if i > 0 and j > 0 and i < n - 1 and j < m - 1:
        avg = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])
        new = u[i, j] + alpha * (avg - u[i, j])
    u_next[i, j] = new
    change[i, j] = wp.abs(new - u[i, j])


def warp_generator(outs, alpha, **kwargs):
    f = pk.warp_kernel(jacobi, list(outs))  # launch_dims: the shape of u
    return lambda u: f(u, alpha=alpha)


def reference(u, alpha):
    inner = u[1:-1, 1:-1]
    avg = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    u_next = u.at[1:-1, 1:-1].set(inner + alpha * (avg - inner))
    return u_next, jnp.abs(u_next - u)


op = pk.XLACustomKernel("examples.warp_jacobi")
op.def_kernel("warp", "cpu", warp_generator)  # Warp's CPU device
op.def_warp_kernel(warp_generator)  # the GPU: Warp's AOT build, native launcher
op.def_jax_raw_kernel(lambda outs, alpha, **kw: lambda u: reference(u, alpha), "cpu")


def sweep(u, alpha=0.8, backend=None):
    outs = [jax.ShapeDtypeStruct(u.shape, u.dtype)] * 2
    return op(u, outs=outs, alpha=alpha, backend=backend)


# The sweep is linear in u, so its tangent is the sweep of the tangent.
op.def_jvp_rule2(lambda t, u, **kw: [sweep(t, kw["alpha"])[0], jnp.zeros_like(t)])

u = jnp.zeros((32, 48), jnp.float32).at[0, :].set(100.0)  # a hot top edge
step = jax.jit(sweep)
for _ in range(50):
    u, change = step(u)
print(f"after 50 sweeps: max change {float(change.max()):.4f}, "
      f"centre {float(u[16, 24]):.4f}")  # fmt: skip

ref_u, ref_change = sweep(u, backend="jax_raw")
got_u, got_change = sweep(u, backend="warp")
np.testing.assert_allclose(got_u, ref_u, rtol=1e-5, atol=1e-5)
np.testing.assert_allclose(got_change, ref_change, rtol=1e-5, atol=1e-5)

batch = jnp.stack([u, 2 * u, u + 1])  # three grids, one call
np.testing.assert_allclose(jax.vmap(sweep)(batch)[0], jax.vmap(reference,
                           (0, None))(batch, 0.8)[0], rtol=1e-5, atol=1e-4)  # fmt: skip

tangent = jnp.ones_like(u)
_, (du, _) = jax.jvp(sweep, (u,), (tangent,))
np.testing.assert_allclose(du, tangent, rtol=1e-6)  # constant fields stay constant
print("warp == jax_raw, vmap and jvp agree")
