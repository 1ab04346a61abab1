"""One Euler step of leaky integrate-and-fire neurons: two outputs, two dtypes.

Parameters travel as scalar attributes (keyword arguments that reach the kernel
under the same names). Run: ``python examples/numba_lif.py``
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numba
import numpy as np

from polykernel import numba_kernel


@numba.njit(parallel=True)
def lif_step(v, i_ext, v_out, spikes, tau_inv, v_th, v_rest, dt):
    for i in numba.prange(v.size):
        v_new = v[i] + dt * (-(v[i] - v_rest) * tau_inv + i_ext[i])
        if v_new >= v_th:
            spikes[i] = 1
            v_out[i] = v_rest
        else:
            spikes[i] = 0
            v_out[i] = v_new


def main() -> None:
    n = 5000
    rng = np.random.default_rng(0)
    v = rng.uniform(-75.0, -50.0, n).astype(np.float32)
    i_ext = rng.uniform(0.0, 5.0, n).astype(np.float32)
    params = {
        "tau_inv": np.float32(1 / 20),
        "v_th": np.float32(-55.0),
        "v_rest": np.float32(-70.0),
        "dt": np.float32(0.1),
    }
    step = numba_kernel(
        lif_step,
        [
            jax.ShapeDtypeStruct((n,), jnp.float32),
            jax.ShapeDtypeStruct((n,), jnp.int32),
        ],
    )
    v_new, spikes = jax.jit(lambda a, b: step(a, b, **params))(v, i_ext)

    p = {k: np.float32(x) for k, x in params.items()}
    ref = v + p["dt"] * (-(v - p["v_rest"]) * p["tau_inv"] + i_ext)
    ref_spk = (ref >= p["v_th"]).astype(np.int32)
    near = np.abs(ref - p["v_th"]) < 1e-4  # rounding may flip these two ways
    ref = np.where(ref_spk == 1, p["v_rest"], ref)
    np.testing.assert_allclose(np.asarray(v_new)[~near], ref[~near], atol=1e-4)
    assert int(np.sum((np.asarray(spikes) != ref_spk) & ~near)) == 0
    print(f"{n} neurons, {int(spikes.sum())} spikes; matches the NumPy reference")


if __name__ == "__main__":
    main()
