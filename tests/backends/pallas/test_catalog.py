"""The catalog's Pallas backends: interpret mode on CPU, Triton lowering for cuda."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocess_support import last_json, run_python

import polykernel as pk
from polykernel import catalog
from polykernel.backends.pallas import TRITON_TARGET, lower_for_cuda

PALLAS_PRIMITIVES = (catalog.scaled_add_p, catalog.lif_step_p)


def test_elementwise_primitives_register_pallas_for_cpu_and_gpu():
    for prim in PALLAS_PRIMITIVES:
        assert "pallas" in prim.available_backends("cpu")
        assert "pallas" in prim.available_backends("gpu")
    assert "pallas" not in catalog.csrmv_p.available_backends("cpu")


def test_scaled_add_pallas_agrees_with_jax_raw_on_any_shape():
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
    got = jax.jit(lambda x, y: catalog.scaled_add(x, y, alpha=3.0, backend="pallas"))(
        x, y
    )
    want = catalog.scaled_add(x, y, alpha=3.0, backend="jax_raw")
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.shape == (5, 7)


def test_scaled_add_pallas_grad_and_vmap():
    x = jnp.linspace(-1.0, 1.0, 9, dtype=jnp.float32)
    y = jnp.ones(9, jnp.float32)

    def loss(a, b):
        return jnp.sum(catalog.scaled_add(a, b, alpha=2.0, backend="pallas") ** 2)

    gx, gy = jax.grad(loss, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 4.0 * (2.0 * x + y), rtol=1e-6)
    np.testing.assert_allclose(gy, 2.0 * (2.0 * x + y), rtol=1e-6)
    xs = jnp.stack([x, 2 * x])
    got = jax.vmap(lambda a: catalog.scaled_add(a, y, backend="pallas"))(xs)
    np.testing.assert_allclose(got, xs + y, rtol=1e-6)


def test_lif_step_pallas_agrees_with_numba_reference_semantics():
    rng = np.random.default_rng(3)
    v = rng.uniform(-75, -50, 101).astype(np.float32)
    i_ext = rng.uniform(0, 300, 101).astype(np.float32)
    v_next, spikes = jax.jit(lambda v, i: catalog.lif_step(v, i, backend="pallas"))(
        v, i_ext
    )
    ref_v, ref_s = catalog.lif_step(v, i_ext, backend="jax_raw")
    np.testing.assert_array_equal(spikes, ref_s)
    np.testing.assert_allclose(v_next, ref_v, rtol=1e-6)
    assert spikes.dtype == np.bool_ and 0 < int(spikes.sum()) < 101


@pytest.mark.slow
@pytest.mark.filterwarnings(
    "ignore:The Pallas Triton backend is deprecated:DeprecationWarning"
)
@pytest.mark.skipif(
    pk._jax_compat.pallas_compiler_params_class("gpu") is None,
    reason="this JAX has no Pallas Triton backend",
)
@pytest.mark.parametrize("n", [1000, 4096])  # a ragged last block, and none
def test_catalog_pallas_kernels_lower_for_cuda(n):
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    add = lower_for_cuda(
        lambda x, y: catalog.scaled_add(x, y, alpha=2.0, backend="pallas"), spec, spec
    )
    lif = lower_for_cuda(
        lambda v, i: catalog.lif_step(v, i, backend="pallas"), spec, spec
    )
    blocks = -(-n // 1024)
    for text, name in ((add, "_scaled_add_pallas"), (lif, "_lif_step_pallas")):
        calls = [line for line in text.splitlines() if "stablehlo.custom_call" in line]
        assert len(calls) == 1 and f"@{TRITON_TARGET}" in calls[0]
        assert f'name = "{name}"' in calls[0]
        assert f"grid_x = {blocks} : i32" in calls[0]
        # Whole blocks only: the arrays are padded (a ragged last block gave wrong
        # integer and bool outputs on an H200 with JAX 0.11.2).
        assert f"tensor<{blocks * 1024}xf32>" in calls[0].split("->")[0]


SHARDED = """
import json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
from polykernel.catalog import lif_step, scaled_add
mesh = jax.make_mesh((4,), ("i",), axis_types=(AxisType.Auto,))
sh = NamedSharding(mesh, P("i"))
v = jax.device_put(jnp.linspace(-70.0, -50.0, 16, dtype=jnp.float32), sh)
i_ext = jax.device_put(jnp.full((16,), 20.0, jnp.float32), sh)
f = jax.jit(lambda v, i: lif_step(v, i, backend="pallas"))
got = f(v, i_ext)
want = lif_step(np.asarray(v), np.asarray(i_ext), backend="jax_raw")
loss = lambda x: jnp.sum(scaled_add(x, x, alpha=2.0, backend="pallas"))
grad = jax.jit(jax.grad(loss))
print(json.dumps({
    "equal": all(np.array_equal(g, w) for g, w in zip(got, want)),
    "sharded": got[0].sharding.spec == P("i"),
    "all_gather": "all-gather" in f.lower(v, i_ext).compile().as_text(),
    "grad": bool(np.allclose(grad(v), 3.0)),
}))
"""


@pytest.mark.slow
def test_pallas_backend_under_sharded_jit(run_env):
    env = run_env | {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    facts = last_json(run_python(code=SHARDED, env=env, timeout=300))
    assert facts == {
        "equal": True,
        "sharded": True,
        "all_gather": False,
        "grad": True,
    }
