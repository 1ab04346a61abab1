"""jax.export (single and multi-platform) and sharded execution of a primitive."""

from __future__ import annotations

import textwrap

import jax
import jax.numpy as jnp
import numpy as np
from subprocess_support import run_python

import polykernel as pk

SPEC = jax.ShapeDtypeStruct((8,), jnp.float32)


def test_export_round_trip_on_cpu():
    op = pk.XLACustomKernel("test.export.cpu")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: jnp.cos(x) * 2)
    f = jax.jit(lambda x: op(x, outs=SPEC))
    exported = jax.export.export(f)(SPEC)
    restored = jax.export.deserialize(exported.serialize())
    x = jnp.linspace(0, 1, 8, dtype=jnp.float32)
    np.testing.assert_allclose(restored.call(x), np.cos(x) * 2, rtol=1e-6)


def test_multi_platform_export_uses_each_platforms_kernel():
    op = pk.XLACustomKernel("test.export.multi")
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: x + 1)
    op.def_kernel("jax_raw", "gpu", lambda outs, **kw: lambda x: x + 2)
    f = jax.jit(lambda x: op(x, outs=SPEC))
    exported = jax.export.export(f, platforms=("cpu", "cuda"))(SPEC)
    assert exported.platforms == ("cpu", "cuda")
    x = jnp.zeros(8, jnp.float32)
    np.testing.assert_allclose(exported.call(x), 1.0)


SHARDING_SCRIPT = textwrap.dedent("""
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    import polykernel as pk

    op = pk.XLACustomKernel("test.sharding")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x * 3)
    mesh = jax.make_mesh((2,), ("i",))
    x = jax.device_put(jnp.arange(8.0, dtype=jnp.float32), NamedSharding(mesh, P("i")))
    spec = jax.ShapeDtypeStruct((8,), jnp.float32)
    y = jax.jit(lambda x: op(x, outs=spec))(x)
    np.testing.assert_allclose(y, np.arange(8.0) * 3)
    local = jax.ShapeDtypeStruct((4,), jnp.float32)
    smap = jax.shard_map(lambda b: op(b, outs=local), mesh=mesh,
                         in_specs=P("i"), out_specs=P("i"))
    z = jax.jit(smap)(x)
    np.testing.assert_allclose(z, np.arange(8.0) * 3)
    print("ok", len(jax.devices()))
""")


def test_sharded_inputs_and_shard_map(run_env):
    out = run_python(code=SHARDING_SCRIPT, env=run_env)
    assert out.strip().endswith("ok 2")
