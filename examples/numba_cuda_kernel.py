"""A Numba-CUDA kernel as a JAX primitive: GPU launch natively, simulator on CPU.

The same ``@cuda.jit`` kernel backs the primitive on both platforms: on a GPU it is
compiled ahead to PTX/cubin and launched by polykernel's native launcher on XLA's
stream (no Python per call); on the CPU (this example's default) it runs under
Numba's CUDA simulator, which is slow but executes the kernel's own indexing.
Kept tiny so that the simulator finishes in a second.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from numba import cuda

import polykernel as pk


@cuda.jit
def relu_and_count(x, zero, out, positives):  # inputs, then outputs
    i = cuda.grid(1)
    if i < x.size:
        out[i] = max(x[i], 0.0)
        if x[i] > 0:
            cuda.atomic.add(positives, 0, 1)


def generator(outs, **kwargs):
    # ``positives`` (output 1) aliases a zeroed input, so it starts at 0: XLA's
    # outputs start uninitialised on a GPU. The kernel still takes every input.
    call = pk.numba_cuda_kernel(
        relu_and_count,
        list(outs),
        launch_dims=outs[0].size,
        threads_per_block=32,
        input_output_aliases={1: 1},
    )
    return lambda x: call(x, jnp.zeros(1, jnp.int32))


relu = pk.XLACustomKernel("examples.relu_and_count")
relu.def_numba_cuda_kernel(generator)  # gpu
relu.def_kernel("numba_cuda", "cpu", generator)  # the simulator, for this machine


def relu_count(x):
    outs = [
        jax.ShapeDtypeStruct(x.shape, x.dtype),
        jax.ShapeDtypeStruct((1,), jnp.int32),
    ]
    return relu(x, outs=outs)


x = jnp.linspace(-1.0, 1.0, 12, dtype=jnp.float32)
y, count = jax.jit(relu_count)(x)
np.testing.assert_allclose(y, np.maximum(np.asarray(x), 0))
assert int(count[0]) == int((np.asarray(x) > 0).sum()) == 6
print("relu:", [round(float(v), 2) for v in y], "positives:", int(count[0]))
