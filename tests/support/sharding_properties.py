"""Property check of sharding rules, run in a child process with 4 CPU devices.

``python sharding_properties.py EXAMPLES SEED`` draws EXAMPLES random rules —
factors placed over 1 or 2 inputs and one output, ranks 1 and 2, factor sizes 4 or
8 — with random meshes (1, 2 or 4 devices, one or two axes), random shardings of
every operand, with and without a partition function, and compares each sharded
result with the unsharded one. Prints one JSON line: the number of examples and
the failures (rule, shardings, max error).

The kernel computes, for any rule: each input summed over its factors the output
lacks, broadcast to the output, plus ``index + 1`` along every factor only the
output carries. With the default per-shard call only shared factors may split
(polykernel keeps the others whole); the partition function splits anything, with
``psum`` over split reduced factors and ``shard.out_offset`` for output-only ones.
"""

from __future__ import annotations

import json
import os
import random
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import polykernel as pk

FACTORS = "abc"
MESHES = [((1,), ("x",)), ((2,), ("x",)), ((4,), ("x",)), ((2, 2), ("x", "y"))]


def draw_rule(rng: random.Random) -> dict:
    sizes = {f: rng.choice([4, 8]) for f in FACTORS}
    ins = [rng.sample(FACTORS, rng.randint(1, 2)) for _ in range(rng.randint(1, 2))]
    out = rng.sample(FACTORS, rng.randint(1, 2))
    shape, names = MESHES[rng.randrange(len(MESHES))]
    mesh_sizes = dict(zip(names, shape, strict=True))

    def spec(factors: list[str]) -> list[str | None]:
        free = list(names)
        dims = []
        for f in factors:
            axis = rng.choice([None, *free])
            if axis is not None and sizes[f] % mesh_sizes[axis] == 0:
                free.remove(axis)
                dims.append(axis)
            else:
                dims.append(None)
        return dims

    return {
        "ins": ins,
        "out": out,
        "sizes": sizes,
        "mesh": [list(shape), list(names)],
        "in_specs": [spec(f) for f in ins],
        "out_spec": spec(out),
        "partition": rng.random() < 0.5,
    }


def reference(rule: dict, xs: list[np.ndarray]) -> np.ndarray:
    out = rule["out"]
    shape = [rule["sizes"][f] for f in out]
    total = np.zeros(shape, np.float32)
    for factors, x in zip(rule["ins"], xs, strict=True):
        kept = [f for f in out if f in factors]
        part = np.einsum(f"{''.join(factors)}->{''.join(kept)}", x)
        view = [rule["sizes"][f] if f in factors else 1 for f in out]
        total = total + part.reshape(view)
    for d, f in enumerate(out):
        if not any(f in factors for factors in rule["ins"]):
            view = [1] * len(out)
            view[d] = shape[d]
            total = total + (np.arange(shape[d], dtype=np.float32) + 1).reshape(view)
    return total


def _local(rule: dict, xs, out_shape, offsets, reduce_axes) -> jax.Array:
    """The kernel on (blocks of) the inputs: ``offsets`` per output dim, and the
    mesh axes to ``psum`` each input's reduced part over (None: no mesh)."""
    out = rule["out"]
    total = jnp.zeros(out_shape, jnp.float32)
    for k, (factors, x) in enumerate(zip(rule["ins"], xs, strict=True)):
        kept = [f for f in out if f in factors]
        part = jnp.einsum(f"{''.join(factors)}->{''.join(kept)}", x)
        if reduce_axes is not None and reduce_axes[k]:
            part = jax.lax.psum(part, reduce_axes[k])
        view = [out_shape[d] if f in factors else 1 for d, f in enumerate(out)]
        total = total + part.reshape(view)
    for d, f in enumerate(out):
        if not any(f in factors for factors in rule["ins"]):
            view = [1] * len(out)
            view[d] = out_shape[d]
            iota = jnp.arange(out_shape[d], dtype=jnp.float32) + offsets[d] + 1
            total = total + iota.reshape(view)
    return total


def make_op(rule: dict, index: int) -> pk.XLACustomKernel:
    op = pk.XLACustomKernel(f"sharding_properties.r{index}")

    def generator(outs, **kw):
        return lambda *xs: _local(rule, xs, outs[0].shape, [0] * len(rule["out"]),
                                  None)  # fmt: skip

    op.def_jax_raw_kernel(generator, platform="cpu")
    text = ", ".join(" ".join(f) for f in rule["ins"]) + " -> " + " ".join(rule["out"])

    def partition(shard, *blocks, outs, **kw):
        reduce_axes = []
        for k, factors in enumerate(rule["ins"]):
            axes = ()
            for d, f in enumerate(factors):
                if f not in rule["out"]:
                    axes += tuple(shard.in_axes(k, d))
            reduce_axes.append(axes)
        offsets = [shard.out_offset(0, d) for d in range(len(rule["out"]))]
        return [_local(rule, blocks, outs[0].shape, offsets, reduce_axes)]

    op.def_sharding_rule(text, partition if rule["partition"] else None)
    return op


def check(rule: dict, index: int) -> float:
    rng = np.random.default_rng(index)
    xs = [rng.standard_normal([rule["sizes"][f] for f in factors]).astype(np.float32)
          for factors in rule["ins"]]  # fmt: skip
    want = reference(rule, xs)
    op = make_op(rule, index)
    spec = jax.ShapeDtypeStruct(want.shape, jnp.float32)
    shape, names = rule["mesh"]
    mesh = jax.make_mesh(tuple(shape), tuple(names),
                         axis_types=(AxisType.Auto,) * len(names))  # fmt: skip
    placed = [jax.device_put(x, NamedSharding(mesh, P(*s)))
              for x, s in zip(xs, rule["in_specs"], strict=True)]  # fmt: skip
    fn = jax.jit(lambda *a: op(*a, outs=[spec])[0],
                 out_shardings=NamedSharding(mesh, P(*rule["out_spec"])))  # fmt: skip
    got = np.asarray(fn(*placed))
    whole = np.asarray(op(*xs, outs=[spec])[0])
    return float(max(np.max(np.abs(got - want)), np.max(np.abs(whole - want))))


def main() -> None:
    examples, seed = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    failures = []
    for i in range(examples):
        rule = draw_rule(rng)
        try:
            error = check(rule, i)
        except Exception as err:  # report it with the rule that raised it
            failures.append({"rule": rule, "raised": f"{type(err).__name__}: {err}"})
            continue
        if not error <= 1e-3:
            failures.append({"rule": rule, "max_error": error})
    print(json.dumps({"devices": len(jax.devices()), "examples": examples,
                      "failures": failures}))  # fmt: skip


if __name__ == "__main__":
    main()
