"""A Triton kernel as a JAX primitive: row-wise softmax, on GPU and on CPU.

``triton_kernel`` wraps a ``@triton.jit`` function (input pointers, then output
pointers, then scalars and ``tl.constexpr`` values). The same kernel generator is
registered for both platforms: on a GPU the kernel is compiled for the device and
launched from native code on XLA's stream; on the CPU (here) it runs in Triton's
interpreter, which is how its semantics are tested without a GPU. A ``jax_raw``
reference and a JVP rule make the primitive differentiable.
Run: ``python examples/triton_softmax_rows.py``
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl

import polykernel as pk


@triton.jit
def softmax_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


def triton_generator(outs, **kwargs):
    rows, cols = outs[0].shape
    block = triton.next_power_of_2(cols)
    kernel = pk.triton_kernel(softmax_rows, outs[0], grid=(rows,), BLOCK=block)
    return lambda x: [kernel(x, n_cols=cols)]


softmax = pk.XLACustomKernel("examples.triton_softmax_rows")
softmax.def_triton_kernel(triton_generator)  # gpu
softmax.def_kernel("triton", "cpu", triton_generator)  # Triton's interpreter
softmax.def_jax_raw_kernel(lambda outs, **kw: lambda x: [jax.nn.softmax(x, axis=-1)])


def _jvp(t, x, **kwargs):  # d softmax = s * (t - sum(s * t))
    s = softmax(x, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)])[0]
    return [s * (t - jnp.sum(s * t, axis=-1, keepdims=True))]


softmax.def_jvp_rule2(_jvp)


def main() -> None:
    x = jnp.asarray(np.random.default_rng(0).standard_normal((4, 6)), jnp.float32)
    out = [jax.ShapeDtypeStruct(x.shape, x.dtype)]
    want = jax.nn.softmax(x, axis=-1)
    got = jax.jit(lambda x: softmax(x, outs=out, backend="triton")[0])(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

    def loss(x, backend):
        return softmax(x, outs=out, backend=backend)[0][:, 0].sum()

    np.testing.assert_allclose(
        jax.grad(loss)(x, "triton"), jax.grad(loss)(x, "jax_raw"), atol=1e-6
    )
    print("softmax rows (Triton interpreter on CPU):", np.asarray(got[0]).round(3))
    print("grad matches jax_raw; on a GPU the same primitive launches a cubin")


if __name__ == "__main__":
    main()
