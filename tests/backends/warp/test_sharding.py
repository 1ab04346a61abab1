"""Warp-backed catalog primitives partition over a CPU mesh like the other backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("warp")

CHILD = r"""
import json, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from polykernel.catalog import csrmv, scaled_add
from polykernel.catalog._support import random_csr

m = jax.make_mesh((2,), ("i",))
rep, rows = NamedSharding(m, P()), NamedSharding(m, P("i"))
host = random_csr(40, 30, 0.2, seed=3)
out = {}
for transpose in (False, True):
    v = np.random.default_rng(1).random(40 if transpose else 30).astype(np.float32)
    args = [jax.device_put(a, rep) for a in host]
    v_in = jax.device_put(v, rows if transpose else rep)
    f = jax.jit(lambda d, i, p, v: csrmv(d, i, p, v, shape=(40, 30),
                transpose=transpose, backend="warp"),
                out_shardings=rep if transpose else rows)
    y = f(*args, v_in)
    whole = csrmv(*host, v, shape=(40, 30), transpose=transpose, backend="jax_raw")
    out[f"csrmv_T={transpose}"] = bool(np.allclose(y, whole, rtol=1e-5, atol=1e-6))
x = jax.device_put(jnp.arange(8, dtype=jnp.float32), rows)
y = jax.jit(lambda x: scaled_add(x, x, alpha=2.0, backend="warp"))(x)
out["scaled_add"] = bool(np.allclose(y, 3 * np.arange(8))) and y.sharding.spec == P("i")
print(json.dumps(out))
"""


@pytest.mark.slow
def test_csrmv_and_scaled_add_on_a_two_device_mesh():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts == {
        "csrmv_T=False": True,
        "csrmv_T=True": True,
        "scaled_add": True,
    }
