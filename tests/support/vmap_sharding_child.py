"""vmap over a batch axis split across devices (run as a script, fresh process).

``python vmap_sharding_child.py N...``: on ``max(N)`` CPU devices, for each mesh
size ``N`` (a mesh of the first ``N`` devices), every catalog primitive on every CPU
backend usable here, ``jax.jit(jax.vmap(...))`` with the batch axis (rows) split over
the devices: on a mesh of ``Explicit`` axes (JAX's default for ``jax.make_mesh``), of
``Auto`` axes, and ``vmap`` inside a ``shard_map`` body; plus edge cases (two mesh
axes, ``in_axes=1``, nested ``vmap``, ``grad``). One process serves every size (XLA
fixes the device count at start; a mesh need not span every device), and each
case's unsharded result is computed once for all the meshes that check it.
Prints one JSON line ``{"devices": n, "meshes": {N: {"devices": devices in the
mesh, "results": {case: {"error": max abs error vs the unsharded result, "spec":
output sharding spec}}}}}``; a case that raised gives ``{"raised": text}``.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

os.environ["XLA_FLAGS"] = (
    f"--xla_force_host_platform_device_count={max(map(int, sys.argv[1:]))}"
)

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

SIZES = [int(n) for n in sys.argv[1:]]
B = 2 * max(SIZES)  # batch rows: 2 per device on the largest mesh, more on others
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


def unsharded(fn: Callable[..., Any], batch: tuple[Any, ...]) -> Any:
    """The reference: ``vmap`` run eagerly on one device, no mesh."""
    return jax.vmap(fn)(*batch)


def run(
    mesh: Any, fn: Callable[..., Any], batch: tuple[Any, ...], how: str, want: Any
) -> dict:
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


def _mesh(n_dev: int, kind: AxisType, names: tuple[str, ...] = ("i",)) -> Any:
    shape = (n_dev,) if len(names) == 1 else (2, n_dev // 2)
    return jax.make_mesh(
        shape, names, axis_types=(kind,) * len(names), devices=jax.devices()[:n_dev]
    )


def edge_cases(n_dev: int) -> dict[str, Callable[[], dict]]:
    explicit = _mesh(n_dev, AxisType.Explicit)
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
        mesh = _mesh(n_dev, AxisType.Explicit, ("a", "b"))
        fn, batch = _cases("numba")["csrmv"]
        return run(mesh, fn, batch, "jit", unsharded(fn, batch))

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
        "two_mesh_axes": two_mesh_axes,  # a 2 x (n_dev / 2) mesh
    }


def _attempt(job: Callable[[], dict]) -> dict:
    try:
        return job()
    except Exception:
        return {"raised": traceback.format_exc()[-3000:]}


def main() -> None:
    meshes = {
        n: {
            "explicit": (_mesh(n, AxisType.Explicit), "jit"),
            "auto": (_mesh(n, AxisType.Auto), "jit"),
            "shard_map": (_mesh(n, AxisType.Explicit), "shard_map"),
        }
        for n in SIZES
    }
    results: dict[int, dict[str, dict]] = {n: {} for n in SIZES}
    for name in _cases("jax_raw"):
        for backend in _backends(name):
            fn, batch = _cases(backend)[name]
            # The same batch on every mesh: one reference (a case whose reference
            # raised reports that on each mesh).
            ref = _attempt(lambda fn=fn, batch=batch: {"want": unsharded(fn, batch)})
            for n in SIZES:
                for kind, (mesh, how) in meshes[n].items():
                    results[n][f"{kind}/{name}/{backend}"] = (
                        ref
                        if "raised" in ref
                        else _attempt(partial(run, mesh, fn, batch, how, ref["want"]))
                    )
    for n in SIZES:
        for key, job in edge_cases(n).items():
            results[n][f"edge/{key}"] = _attempt(job)
    meshes_out = {
        n: {"devices": meshes[n]["explicit"][0].devices.size, "results": results[n]}
        for n in SIZES
    }
    print(json.dumps({"devices": jax.device_count(), "meshes": meshes_out}))


if __name__ == "__main__":
    main()
