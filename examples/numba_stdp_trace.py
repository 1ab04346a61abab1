"""An STDP eligibility trace as an ``XLACustomKernel`` with a Numba CPU backend.

The kernel generator receives the output structs (and the input avals) at lowering
time and returns a JAX-traceable function; the trace is advanced for 100 steps
inside ``jax.jit`` and compared with a NumPy loop.
Run: ``python examples/numba_stdp_trace.py``
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numba
import numpy as np

from polykernel import XLACustomKernel, numba_kernel


@numba.njit(parallel=True)
def trace_update(trace, spikes, out, tau_inv):
    decay = math.exp(-tau_inv)
    for i in numba.prange(out.size):
        out[i] = trace[i] * decay + spikes[i]


def trace_generator(outs, tau_inv, **_):
    kernel = numba_kernel(trace_update, outs[0])

    def run(trace, spikes):
        return [kernel(trace, spikes, tau_inv=np.float32(tau_inv))]

    return run


trace_op = XLACustomKernel("examples.numba_stdp_trace")
trace_op.def_numba_kernel(trace_generator)


def main() -> None:
    n, steps, tau_inv = 1000, 100, 1.0 / 20.0
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)

    @jax.jit
    def run(trace, all_spikes):
        def body(t, tr):
            return trace_op(tr, all_spikes[t], outs=[spec], tau_inv=tau_inv)[0]

        return jax.lax.fori_loop(0, steps, body, trace)

    rng = np.random.default_rng(1)
    spikes = (rng.random((steps, n)) < 0.05).astype(np.float32)
    got = np.asarray(run(jnp.zeros(n, jnp.float32), spikes))

    decay = np.float32(math.exp(-tau_inv))
    ref = np.zeros(n, np.float32)
    for t in range(steps):
        ref = ref * decay + spikes[t]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    steady = 0.05 / (1 - math.exp(-tau_inv))
    print(f"trace after {steps} steps: mean {got.mean():.4f}, max {got.max():.4f}")
    print(f"steady state {steady:.4f}; matches the NumPy loop")


if __name__ == "__main__":
    main()
