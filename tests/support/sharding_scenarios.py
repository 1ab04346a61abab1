"""Sharding scenarios run in a child process with 4 CPU devices (test_sharding.py).

XLA reads ``--xla_force_host_platform_device_count`` once, when JAX first creates
its CPU client, so these run in a fresh interpreter. Each scenario returns a dict;
the process prints them as one JSON object for the parent's assertions.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import polykernel as pk

N = 16
SPEC = jax.ShapeDtypeStruct((N,), jnp.float32)
CPP = """
void triple(const pk::Tensor& x, pk::Tensor& out) {
  const float* a = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = 3.f * a[i];
}
"""


def mesh(*names: str, auto: bool = True) -> jax.sharding.Mesh:
    kind = AxisType.Auto if auto else AxisType.Explicit
    shape = (4,) if len(names) == 1 else (2, 2)
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(names))


def hlo_facts(compiled_text: str) -> dict:
    """What the parent asserts on: collectives and the custom calls' lines."""
    lines = [ln.strip() for ln in compiled_text.splitlines()]
    return {
        "all_gather": any("all-gather" in ln for ln in lines),
        "collective_permute": any("collective-permute" in ln for ln in lines),
        "all_reduce": sum(" all-reduce(" in ln for ln in lines),
        "custom_calls": [ln for ln in lines if "custom-call(" in ln],
    }


def numba_triple_op(name: str, rule: bool) -> pk.XLACustomKernel:
    import numba

    @numba.njit
    def triple(x, out):
        for i in range(out.size):
            out[i] = 3 * x[i]

    op = pk.XLACustomKernel(name)
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(triple, outs[0]))
    if rule:
        op.def_batch_partitioning()
    return op


def cpp_triple_op(name: str) -> pk.XLACustomKernel:
    module = pk.load_cpp_inline("sharding_scenarios_triple", CPP, ["triple"])
    op = pk.XLACustomKernel(name)
    op.def_cuda_raw_kernel(
        lambda outs, **kw: lambda x: module.triple(x, outs=outs[0]), platform="cpu"
    )
    op.def_batch_partitioning()
    return op


def run_elementwise(op: pk.XLACustomKernel, auto: bool = True) -> dict:
    m = mesh("i", auto=auto)
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(m, P("i")))
    f = jax.jit(lambda x: op(x, outs=SPEC))
    y = f(x)
    return {
        "ok": bool(np.array_equal(np.asarray(y), np.arange(N) * 3.0)),
        "out_spec": str(y.sharding.spec),
        **hlo_facts(f.lower(x).compile().as_text()),
    }


def scenario_numba_without_rule() -> dict:
    return run_elementwise(numba_triple_op("scen.numba_plain", rule=False))


def scenario_numba_batch() -> dict:
    return run_elementwise(numba_triple_op("scen.numba_batch", rule=True))


def scenario_numba_batch_explicit_axes() -> dict:
    op = numba_triple_op("scen.numba_explicit", rule=True)
    return run_elementwise(op, auto=False)


def scenario_cpp_batch() -> dict:
    return run_elementwise(cpp_triple_op("scen.cpp_batch"))


def scenario_shard_map() -> dict:
    m = mesh("i")
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(m, P("i")))
    local = jax.ShapeDtypeStruct((N // 4,), jnp.float32)
    results = {}
    ops = {"numba": numba_triple_op("scen.smap_numba", rule=True)}
    ops["cuda_raw"] = cpp_triple_op("scen.smap_cpp")
    for backend, op in ops.items():
        smap = jax.shard_map(
            lambda b, op=op: op(b, outs=local),
            mesh=m,
            in_specs=P("i"),
            out_specs=P("i"),
        )
        y = jax.jit(smap)(x)
        results[backend] = bool(np.array_equal(np.asarray(y), np.arange(N) * 3.0))
    return results


def scenario_two_axes() -> dict:
    import numba

    @numba.njit
    def add_rows(x, out):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                out[i, j] = x[i, j] + j

    op = pk.XLACustomKernel("scen.two_axes")
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(add_rows, outs[0]))
    op.def_batch_partitioning(n_axes=2)
    m = mesh("a", "b")
    host = np.arange(48, dtype=np.float32).reshape(8, 6)
    x = jax.device_put(host, NamedSharding(m, P("a", "b")))
    spec = jax.ShapeDtypeStruct((8, 6), jnp.float32)
    f = jax.jit(lambda x: op(x, outs=spec))
    # Each block sees local column numbers: the kernel adds j of its own block.
    expected = host + np.tile(np.arange(3), 2)[None, :]
    return {
        "ok": bool(np.array_equal(np.asarray(f(x)), expected)),
        **hlo_facts(f.lower(x).compile().as_text()),
    }


def scenario_replicated_and_scalar_inputs() -> dict:
    import numba

    @numba.njit
    def affine(x, w, s, out):
        for i in range(out.size):
            out[i] = x[i] * w[i % w.size] + s[()]

    op = pk.XLACustomKernel("scen.replicated")
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(affine, outs[0]))
    op.def_batch_partitioning(replicated_inputs=(1,))
    m = mesh("i")
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(m, P("i")))
    w = jnp.array([1.0, 10.0], jnp.float32)
    s = jnp.float32(0.5)
    f = jax.jit(lambda x, w, s: op(x, w, s, outs=SPEC))
    expected = np.arange(N) * np.tile([1.0, 10.0], N // 2) + 0.5
    return {
        "ok": bool(np.array_equal(np.asarray(f(x, w, s)), expected)),
        **hlo_facts(f.lower(x, w, s).compile().as_text()),
    }


def scenario_lif_multi_output_and_grad() -> dict:
    from polykernel.catalog import lif_step, scaled_add

    m = mesh("i")
    sh = NamedSharding(m, P("i"))
    v = jax.device_put(jnp.linspace(-70.0, -50.0, N, dtype=jnp.float32), sh)
    i_ext = jax.device_put(jnp.full((N,), 20.0, jnp.float32), sh)
    results = {}
    for backend in ("jax_raw", "numba", "cuda_raw"):
        f = jax.jit(lambda v, i, b=backend: lif_step(v, i, backend=b))
        got, want = (
            f(v, i_ext),
            lif_step(np.asarray(v), np.asarray(i_ext), backend=backend),
        )
        same = all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
        loss = jax.jit(
            jax.grad(
                lambda x, b=backend: jnp.sum(scaled_add(x, x, alpha=2.0, backend=b))
            )
        )
        grad_ok = bool(np.allclose(loss(v), 3.0))
        facts = hlo_facts(f.lower(v, i_ext).compile().as_text())
        grad_facts = hlo_facts(loss.lower(v).compile().as_text())
        results[backend] = {
            "ok": same and grad_ok,
            "all_gather": facts["all_gather"] or grad_facts["all_gather"],
            "custom_calls": facts["custom_calls"],
        }
    return results


def csr_inputs(transpose: bool) -> tuple:
    from polykernel.catalog._support import random_csr

    data, indices, indptr = random_csr(40, 30, 0.3, seed=1)
    v = np.random.default_rng(0).random(40 if transpose else 30).astype(np.float32)
    return data, indices, indptr, v


def scenario_csr_rows() -> dict:
    from polykernel.catalog import csrmv

    m = mesh("i")
    rep, rows = NamedSharding(m, P()), NamedSharding(m, P("i"))
    host = csr_inputs(transpose=False)
    args = [jax.device_put(a, rep) for a in host]
    results = {}
    for backend in ("jax_raw", "numba", "cuda_raw"):
        f = jax.jit(
            lambda d, i, p, v, b=backend: csrmv(d, i, p, v, shape=(40, 30), backend=b),
            out_shardings=rows,
        )
        y = f(*args)
        whole = csrmv(*host, shape=(40, 30), backend=backend)
        results[backend] = {
            "equal": bool(np.array_equal(np.asarray(y), np.asarray(whole))),
            "out_spec": str(y.sharding.spec),
            **hlo_facts(f.lower(*args).compile().as_text()),
        }
    return results


def scenario_csr_transpose_rows() -> dict:
    from polykernel.catalog import csrmv

    m = mesh("i")
    rep, rows = NamedSharding(m, P()), NamedSharding(m, P("i"))
    host = csr_inputs(transpose=True)
    args = [
        jax.device_put(a, s) for a, s in zip(host, (rep, rep, rep, rows), strict=True)
    ]
    results = {}
    for backend in ("jax_raw", "numba", "cuda_raw"):
        f = jax.jit(
            lambda d, i, p, v, b=backend: csrmv(
                d, i, p, v, shape=(40, 30), transpose=True, backend=b
            )
        )
        y = f(*args)
        whole = csrmv(*host, shape=(40, 30), transpose=True, backend=backend)
        err = float(np.max(np.abs(np.asarray(y) - np.asarray(whole))))
        results[backend] = {
            "max_abs_err": err,
            **hlo_facts(f.lower(*args).compile().as_text()),
        }
    return results


def scenario_bad_partition_result() -> dict:
    op = pk.XLACustomKernel("scen.bad_partition")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x * 2)
    op.def_sharding_rule("i -> i", lambda shard, x, *, outs: x[:1])
    m = mesh("i")
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(m, P("i")))
    try:
        jax.jit(lambda x: op(x, outs=SPEC))(x)
    except Exception as err:  # the partitioner reports it from inside XLA
        return {"error": f"{type(err).__name__}: {err}"}
    return {"error": None}


#: Partition functions returning what is not one block per output, and the shard
#: methods given one axis name, a wrong one or a non-name.
JUNK_PARTITIONS = {
    "none": lambda shard, x, *, outs: None,
    "dict": lambda shard, x, *, outs: {"y": x},
    "float": lambda shard, x, *, outs: 2.0,
    "count_by_name": lambda shard, x, *, outs: x * shard.count("i"),
    "index_by_name": lambda shard, x, *, outs: x + 0 * shard.index("i"),
    "count_unknown_axis": lambda shard, x, *, outs: x * shard.count("dev"),
    "index_not_a_name": lambda shard, x, *, outs: x + shard.index(5),
}


def scenario_partition_results() -> dict:
    m = mesh("i")
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(m, P("i")))
    results = {}
    for case, partition in JUNK_PARTITIONS.items():
        op = pk.XLACustomKernel(f"scen.partition_{case}")
        op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x * 4)
        op.def_sharding_rule("i -> i", partition)
        try:
            y = jax.jit(lambda x, op=op: op(x, outs=SPEC))(x)
            results[case] = {"values": np.asarray(y).tolist()}
        except Exception as err:
            results[case] = {"error": f"{type(err).__name__}: {err}"}
    return results


def scenario_rule_rank_mismatch() -> dict:
    op = pk.XLACustomKernel("scen.bad_rule")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x * 2)
    op.def_sharding_rule("i j -> i")
    m = mesh("i")
    x = jax.device_put(jnp.arange(N, dtype=jnp.float32), NamedSharding(m, P("i")))
    try:
        jax.jit(lambda x: op(x, outs=SPEC))(x)
    except Exception as err:
        return {"error": f"{type(err).__name__}: {err}"}
    return {"error": None}


def scenario_output_only_factor() -> dict:
    """The issue-20 report: ``out[j] = sum(x) * (j + 1)``, rule ``"i -> j"``, output
    sharded over 4 devices (each shard used to compute block 0)."""

    def kernel(outs, **kw):
        return lambda x: jnp.sum(x) * jnp.arange(1, N + 1, dtype=x.dtype)

    def partition(shard, x, *, outs):  # the example of docs/sharding.md
        total = jnp.sum(x)
        if shard.in_axes(0, 0):  # x's block is split: add the partial sums
            total = jax.lax.psum(total, shard.in_axes(0, 0))
        j = shard.out_offset(0) + jnp.arange(shard.outs[0].shape[0])
        return [total * (j + 1).astype(x.dtype)]

    m = mesh("i")
    x = jnp.arange(N, dtype=jnp.float32)
    results = {}
    for label, fn in (("whole", None), ("partition", partition)):
        op = pk.XLACustomKernel(f"scen.output_only_{label}")
        op.def_jax_raw_kernel(kernel)
        op.def_sharding_rule("i -> j", fn)
        for x_spec in (P(), P("i")):
            f = jax.jit(lambda x, op=op: op(x, outs=SPEC),
                        out_shardings=NamedSharding(m, P("i")))  # fmt: skip
            y = f(jax.device_put(x, NamedSharding(m, x_spec)))
            results[f"{label} x={x_spec}"] = {
                "values": np.asarray(y).tolist(),
                "out_spec": str(y.sharding.spec),
            }
    return results


def main(names: list[str]) -> None:
    results = {}
    for name in names:
        try:
            results[name] = globals()[f"scenario_{name}"]()
        except Exception:
            results[name] = {"crashed": traceback.format_exc()}
    print(json.dumps({"devices": len(jax.devices()), "results": results}))


if __name__ == "__main__":
    main(sys.argv[1:])
