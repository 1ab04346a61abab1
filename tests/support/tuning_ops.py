"""Primitives for the tuning tests: small, fast, with seeded faults on demand.

``make_op(name, **faults)`` returns an ``XLACustomKernel`` computing ``2 * x`` with
a ``jax_raw`` reference and a Numba backend tunable over ``variant`` (``"a"``,
``"b"``, ``"c"``: the same result, ``"b"`` made slow by extra passes), plus, when
asked, seeded faults: a ``variant`` whose outputs are wrong, one that raises when
built, and one that writes into its input buffer.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np

import polykernel as pk
from polykernel.benchmark import BenchmarkConfig


@numba.njit
def _double(x, out, passes):
    for _ in range(passes):
        for i in range(out.size):
            out[i] = 2 * x[i]


@numba.njit
def _wrong(x, out):
    for i in range(out.size):
        out[i] = 3 * x[i]


@numba.njit
def _clobber(x, out):
    for i in range(out.size):
        out[i] = 2 * x[i]
        x[i] = -7.0  # writes into its input buffer


def _numba_generator(outs: Any, variant: str, **kw: Any) -> Any:
    if variant == "wrong":
        return pk.numba_kernel(_wrong, outs[0])
    if variant == "raises":
        raise RuntimeError("seeded build failure")
    if variant == "clobber":
        return pk.numba_kernel(_clobber, outs[0])
    kernel = pk.numba_kernel(_double, outs[0])
    passes = {"a": 1, "b": 400, "c": 1}[variant]
    return lambda x: kernel(x, passes=passes)


def make_op(
    name: str, variants: tuple[str, ...] = ("a", "b", "c")
) -> pk.XLACustomKernel:
    op = pk.XLACustomKernel(name)
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    op.def_numba_kernel(_numba_generator, tune={"variant": list(variants)})
    op.def_call(
        lambda x, **kw: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), **kw)
    )
    op.def_benchmark_data(lambda *, platform: configs((1000, 100_000)))
    return op


def configs(sizes: tuple[int, ...]) -> list[BenchmarkConfig]:
    rng = np.random.default_rng(0)
    return [
        BenchmarkConfig(f"n={n}", (rng.standard_normal(n).astype(np.float32),))
        for n in sizes
    ]


def spec(n: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((n,), jnp.float32)
