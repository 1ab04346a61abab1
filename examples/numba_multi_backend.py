"""One primitive, two CPU backends: a Numba kernel and a pure-JAX reference.

``def_numba_kernel`` registers the Numba generator (the CPU default, as it comes
first); ``def_kernel("jax_raw", "cpu", ...)`` adds a plain-JAX one. ``backend=``
picks one per call, and both must agree.
Run: ``python examples/numba_multi_backend.py``
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np

import polykernel as pk


@numba.njit(parallel=True)
def scale_numba(x, s, out):
    for i in numba.prange(out.size):
        out[i] = x[i] * s[0]


def numba_generator(outs, **_):
    kernel = pk.numba_kernel(scale_numba, outs[0])
    return lambda x, s: [kernel(x, s)]


def jax_generator(outs, **_):
    return lambda x, s: [(x * s[0]).astype(outs[0].dtype)]


scale = pk.XLACustomKernel("examples.numba_multi_backend_scale")
scale.def_numba_kernel(numba_generator)
scale.def_kernel("jax_raw", "cpu", jax_generator)


def main() -> None:
    n = 256
    x = jnp.arange(n, dtype=jnp.float32)
    s = jnp.array([3.14], jnp.float32)
    spec = [jax.ShapeDtypeStruct((n,), jnp.float32)]
    assert scale.available_backends("cpu") == ["numba", "jax_raw"]
    by_numba = scale(x, s, outs=spec)[0]  # default backend: numba
    by_jax = jax.jit(lambda a, b: scale(a, b, outs=spec, backend="jax_raw")[0])(x, s)
    np.testing.assert_allclose(by_numba, by_jax, rtol=1e-6)
    np.testing.assert_allclose(
        by_numba, np.arange(n, dtype=np.float32) * np.float32(3.14)
    )
    print("numba and jax_raw backends agree:", scale.available_backends("cpu"))


if __name__ == "__main__":
    main()
