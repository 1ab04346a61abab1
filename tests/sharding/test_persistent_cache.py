"""JAX's persistent compilation cache never serves a program partitioned by another
function (the ``id``-keyed ``custom_partitioning`` callback; CI of 2026-11-29).

JAX keys a ``custom_partitioning`` call by its callback object's address; a freed
object's address is reused, and a program compiled for one partition function was
then loaded for another (one primitive's block scaled by another's factor). The
child forces what happens by chance: every callback at the same address.
"""

from __future__ import annotations

import textwrap

from subprocess_support import run_python

CHILD = textwrap.dedent("""
    import os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax, jax.numpy as jnp, numpy as np
    from jax._src import custom_partitioning
    from jax.sharding import NamedSharding, PartitionSpec as P
    import polykernel as pk

    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    jax.config.update("jax_remove_custom_partitioning_ptr_from_cache_key",
                      sys.argv[2] == "removed")
    custom_partitioning.id = lambda obj: 4096  # every callback at one address

    mesh = jax.make_mesh((4,), ("i",))
    x = jax.device_put(jnp.arange(8.0, dtype=jnp.float32), NamedSharding(mesh, P("i")))
    spec = jax.ShapeDtypeStruct((8,), jnp.float32)
    got = []
    for k in (2, 3, 5):
        op = pk.XLACustomKernel(f"test.cache_key.scale{k}")
        op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x)
        op.def_sharding_rule("i -> i", lambda shard, x, *, outs, k=k: x * k)
        got.append(float(np.asarray(jax.jit(lambda x, op=op: op(x, outs=spec))(x))[1]))
    print("scaled", got, "cache entries", len(os.listdir(sys.argv[1])))
""")


def test_a_reused_callback_address_does_not_load_another_partition(run_env, tmp_path):
    for mode in ("kept", "removed"):  # JAX's jax_remove_custom_partitioning_ptr_...
        cache = tmp_path / mode
        cache.mkdir()
        out = run_python("-c", CHILD, cache, mode, env=run_env).split()
        assert out[:4] == ["scaled", "[2.0,", "3.0,", "5.0]"], (mode, out)
        assert int(out[-1]) >= 3, out  # the cache was on: every program was written
