"""Sharding rules never give wrong answers: drawn rules, sharded vs unsharded.

``sharding_properties.py`` (a child process with 4 CPU devices) draws rules —
factor placements over one or two inputs and an output, ranks 1-2, meshes of 1, 2
and 4 devices, random shardings of every operand, with and without a partition
function — and compares every sharded result with the unsharded one. Any rule
partitions correctly: factors only the outputs (or only the inputs) carry stay
whole unless a partition function handles them, and a partition function learns
its block's offset from ``shard.out_offset``.
"""

from __future__ import annotations

import os

import pytest
from subprocess_support import SUPPORT, last_json, run_python

CHILD = SUPPORT / "sharding_properties.py"
LONG = os.environ.get("POLYKERNEL_HYPOTHESIS_PROFILE") == "long"


def _drawn(count: int, seed: int, env: dict[str, str], timeout: float) -> dict:
    """The child's report on ``count`` rules drawn with ``seed`` (forked by the
    ``full`` zygote, before any JAX backend starts: it sets 4 devices)."""
    argv = (CHILD, str(count), str(seed))
    out = run_python(*argv, env=env, timeout=timeout, forked=True, kind="full")
    return last_json(out)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_every_drawn_rule_gives_the_unsharded_result(seed, run_env):
    report = _drawn(40, seed, run_env, timeout=300)
    assert report["devices"] == 4 and report["examples"] == 40
    assert report["failures"] == []


@pytest.mark.slow
@pytest.mark.skipif(not LONG, reason="set POLYKERNEL_HYPOTHESIS_PROFILE=long")
def test_many_drawn_rules_give_the_unsharded_result(run_env):
    report = _drawn(600, 7, run_env, timeout=1800)
    assert report["failures"] == []


def test_a_factor_named_twice_in_one_operand_is_refused():
    import polykernel as pk

    op = pk.XLACustomKernel("test_sharding_properties.twice")
    with pytest.raises(pk.KernelRegistrationError, match=r"names factor 'i' twice "
                       r"in one operand \('i i'\)"):  # fmt: skip
        op.def_sharding_rule("i i -> i")


def test_a_factor_with_two_sizes_is_refused_at_lowering():
    import jax
    import jax.numpy as jnp

    import polykernel as pk

    op = pk.XLACustomKernel("test_sharding_properties.sizes")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x, y: x[:4] + y, platform="cpu")
    op.def_sharding_rule("i, i -> i")
    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    x, y = jnp.ones(8), jnp.ones(4)
    # One device: no partitioning, the call runs as it is.
    assert op(x, y, outs=[spec])[0].shape == (4,)
    from polykernel.sharding.rules import get_rule

    with pytest.raises(
        pk.KernelRegistrationError,
        match=r"gives factor 'i' size 8 "
        r"\(input 0 dimension 0\) and size 4 \(input 1 dimension 0\)",
    ):
        get_rule(op.primitive).resolve([1, 1], [spec], (x, y), {})
