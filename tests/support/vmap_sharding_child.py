"""vmap over a batch axis split across devices (run as a script, fresh process).

``python vmap_sharding_child.py N_DEVICES``: on ``N_DEVICES`` CPU devices, every
catalog primitive on every CPU backend usable here, ``jax.jit(jax.vmap(...))`` with
the batch axis (rows) split over the devices: on a mesh of ``Explicit`` axes (JAX's
default for ``jax.make_mesh``), of ``Auto`` axes, and ``vmap`` inside a
``shard_map`` body; plus edge cases (two mesh axes, ``in_axes=1``, nested ``vmap``,
``grad``).
Prints one JSON line ``{"devices": n, "results": {case: {"error": max abs error vs
the unsharded result, "spec": output sharding spec}}}``; a case that raised gives
``{"raised": text}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={sys.argv[1]}"

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from polykernel.catalog import (
    PRIMITIVES,
    csrmv,
    event_csrmv,
    lif_step,
    scaled_add,
)
from polykernel.catalog._support import random_csr

N_DEV = int(sys.argv[1])
B = 2 * N_DEV  # batch rows: 2 per device
ROWS, COLS = 12, 10
rng = np.random.default_rng(0)
CSR = random_csr(ROWS, COLS, 0.4, seed=1)


def _cases(backend: str) -> dict[str, tuple[Callable[..., Any], tuple[Any, ...]]]:
    """Per primitive: a function of one batch element's operands, and the batch."""
    data, indices, indptr = CSR
    x = rng.standard_normal((B, 16)).astype(np.float32)
    y = rng.standard_normal((B, 16)).astype(np.float32)
    v = rng.standard_normal((B, COLS)).astype(np.float32)
    u = rng.standard_normal((B, ROWS)).astype(np.float32)
    spikes = rng.random((B, ROWS)) < 0.5
    mv = -60 + 10 * rng.random((B, 16)).astype(np.float32)
    i_ext = rng.random((B, 16)).astype(np.float32)
    return {
        "scaled_add": (
            lambda a, b: scaled_add(a, b, alpha=1.5, backend=backend),
            (x, y),
        ),
        "csrmv": (
            lambda w: csrmv(
                data, indices, indptr, w, shape=(ROWS, COLS), backend=backend
            ),
            (v,),
        ),
        "csrmv_T": (
            lambda w: csrmv(
                data,
                indices,
                indptr,
                w,
                shape=(ROWS, COLS),
                transpose=True,
                backend=backend,
            ),
            (u,),
        ),
        "event_csrmv": (
            lambda s: event_csrmv(
                data, indices, indptr, s, n_post=COLS, backend=backend
            ),
            (spikes,),
        ),
        "lif_step": (lambda a, b: lif_step(a, b, backend=backend), (mv, i_ext)),
    }


def _backends(name: str) -> list[str]:
    prim = next(p for p in PRIMITIVES if p.name.endswith("." + name.removesuffix("_T")))
    return prim.available_backends("cpu")


def _max_error(got: Any, want: Any) -> float:
    pairs = zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True)
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w))))
               for g, w in pairs)  # fmt: skip


def _spec(out: Any) -> str:
    return str(jax.tree.leaves(out)[0].sharding.spec)


def run(mesh: Any, fn: Callable[..., Any], batch: tuple[Any, ...], how: str) -> dict:
    want = jax.vmap(fn)(*batch)  # one device, no mesh
    rows = NamedSharding(mesh, P(mesh.axis_names))
    args = [jax.device_put(a, rows) for a in batch]
    if how == "shard_map":
        body = jax.shard_map(jax.vmap(fn), mesh=mesh, in_specs=P(mesh.axis_names),
                             out_specs=P(mesh.axis_names))  # fmt: skip
        got = jax.jit(body)(*args)
    else:
        with jax.set_mesh(mesh):
            got = jax.jit(jax.vmap(fn))(*args)
    return {"error": _max_error(got, want), "spec": _spec(got)}


def _mesh(kind: AxisType, names: tuple[str, ...] = ("i",)) -> Any:
    shape = (N_DEV,) if len(names) == 1 else (2, N_DEV // 2)
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(names))


def edge_cases() -> dict[str, Callable[[], dict]]:
    explicit = _mesh(AxisType.Explicit)
    x = rng.standard_normal((B, 16)).astype(np.float32)

    def batch_on_axis_1() -> dict:
        xt = np.ascontiguousarray(x.T)
        xs = jax.device_put(xt, NamedSharding(explicit, P(None, "i")))
        f = jax.vmap(lambda a: scaled_add(a, a, alpha=3.0), in_axes=1)
        with jax.set_mesh(explicit):
            got = jax.jit(f)(xs)
        return {"error": _max_error(got, 4 * x), "spec": _spec(got)}

    def nested_vmap() -> dict:
        x3 = x.reshape(B, 4, 4)
        xs = jax.device_put(x3, NamedSharding(explicit, P("i")))
        f = jax.vmap(jax.vmap(lambda a: scaled_add(a, a, alpha=0.5)))
        with jax.set_mesh(explicit):
            got = jax.jit(f)(xs)
        return {"error": _max_error(got, 1.5 * x3), "spec": _spec(got)}

    def two_mesh_axes() -> dict:
        mesh = _mesh(AxisType.Explicit, ("a", "b"))
        fn, batch = _cases("numba")["csrmv"]
        return run(mesh, fn, batch, "jit")

    def grad_through_vmap() -> dict:
        xs = jax.device_put(x, NamedSharding(explicit, P("i")))

        def loss(a):
            return jnp.sum(jax.vmap(lambda r: scaled_add(r, r, alpha=2.0))(a) ** 2)

        with jax.set_mesh(explicit):
            got = jax.jit(jax.grad(loss))(xs)
        return {"error": _max_error(got, 18 * x), "spec": _spec(got)}

    return {
        "batch_on_axis_1": batch_on_axis_1,
        "nested_vmap": nested_vmap,
        "grad_through_vmap": grad_through_vmap,
        "two_mesh_axes": two_mesh_axes,  # a 2 x (N_DEV / 2) mesh
    }


def main() -> None:
    results: dict[str, dict] = {}
    meshes = {"explicit": (_mesh(AxisType.Explicit), "jit"),
              "auto": (_mesh(AxisType.Auto), "jit"),
              "shard_map": (_mesh(AxisType.Explicit), "shard_map")}  # fmt: skip
    jobs: dict[str, Callable[[], dict]] = {}
    for name in _cases("jax_raw"):
        for backend in _backends(name):
            fn, batch = _cases(backend)[name]
            for kind, (mesh, how) in meshes.items():
                jobs[f"{kind}/{name}/{backend}"] = partial(run, mesh, fn, batch, how)
    jobs.update({f"edge/{k}": v for k, v in edge_cases().items()})
    for key, job in jobs.items():
        try:
            results[key] = job()
        except Exception:
            results[key] = {"raised": traceback.format_exc()[-3000:]}
    print(json.dumps({"devices": jax.device_count(), "results": results}))


if __name__ == "__main__":
    main()
