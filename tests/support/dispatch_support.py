"""What the dispatch tests share: a two-backend primitive that records what its
generators get, and fresh table entries for it written without timing anything."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

import polykernel as pk
from polykernel.dispatch import Choice, Entry, Key, Measurement, Scope, device_identity

N = 1000  # bucket 10 (2^10 = 1024)


def spec(n: int = N) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((n,), jnp.float32)


def make(name: str, seen: list | None = None) -> pk.XLACustomKernel:
    """``2 * x`` on jax_raw (default) and on a second backend 'numba' (a jax
    function) tunable over ``block``; ``seen`` collects what each lowering's
    generator got."""
    seen = [] if seen is None else seen

    def raw(outs, **kw):
        seen.append(("jax_raw", kw.get("block")))
        return lambda x: 2 * x

    def tuned(outs, block, **kw):
        seen.append(("numba", block))
        return lambda x: x * 2 + 0 * block

    op = pk.XLACustomKernel(name)
    op.def_kernel("jax_raw", "cpu", raw)
    op.def_kernel("numba", "cpu", tuned, tune={"block": [1, 2, 4]})
    return op


def signature() -> str:
    return json.dumps({"in": ["float32[1]"], "static": {}}, sort_keys=True)


def kernels(op: pk.XLACustomKernel, platform: str = "cpu") -> tuple:
    """The identities of ``op``'s kernels now: what makes an entry fresh."""
    registered = op._registered(platform)
    return tuple((b, registered.identity(b)) for b in sorted(registered.kernels))


def entry(
    op: pk.XLACustomKernel,
    bucket: tuple[int, ...] | None,
    backend: str,
    params: Mapping[str, Any],
    *,
    device: str | None = None,
    family: str | None = None,
    ratios: Mapping[tuple[str, Any], float] | None = None,
    scope: Scope = Scope.TUNED,
    fresh: bool = True,
) -> Entry:
    """A fresh (or, ``fresh=False``, unidentified) entry of ``op`` on the cpu whose
    winner is ``backend(**params)``; ``ratios`` ``{(backend, block): ratio}`` are
    the candidates it measured (block None: no parameter)."""
    here_device, here_family = device_identity("cpu")
    key = Key(
        op.name,
        "cpu",
        device or here_device,
        family or here_family,
        signature() if scope == Scope.TUNED else "*",
        bucket,
    )
    measured = tuple(
        Measurement(
            Choice.of(b, {} if block is None else {"block": block}),
            "ok",
            median_s=1e-5 * r,
            ratio=r,
        )
        for (b, block), r in (ratios or {}).items()
    )
    return Entry(
        key,
        scope,
        Choice.of(backend, params),
        kernels=kernels(op) if fresh else (),
        measured=measured,
        recorded={"shape": [[2 ** (bucket or (0,))[0]]]},
    )
