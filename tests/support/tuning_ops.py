"""Primitives for the tuning tests: small, fast, with seeded faults on demand.

``make_op(name, variants=...)`` returns an ``XLACustomKernel`` computing ``2 * x``
with a ``jax_raw`` reference and a Numba backend tunable over ``variant``:

- ``"a"``, ``"b"``, ``"c"``: the same result, ``"b"`` made slow by extra passes;
- ``"wrong"``: outputs ``3 * x``; ``"raises"``: its generator raises;
- ``"clobber"``: right outputs, but it writes into its input buffer;
- ``"slow"``: right outputs, about :data:`SLOW_S` seconds per call;
- ``"spin"``: right outputs, after about :data:`SPIN_S` seconds of work (a kernel
  that does not return within any test's budget, yet ends on its own).

The slow variants spin on a dependent chain of floating-point operations whose
length is calibrated once per process (:func:`spin_iterations`).
"""

from __future__ import annotations

import functools
import time
from typing import Any

import jax
import jax.numpy as jnp
import numba
import numpy as np

import polykernel as pk
from polykernel.benchmark import BenchmarkConfig

#: ``op.tune`` arguments for tests of what is timed, refused, recorded and cut, not
#: of how closely the times were measured (a pick they assert is between candidates
#: 400x apart, or the only one left): one pass, ended after its first window of
#: rounds (no spread reaches the 9x bound), where the default 5 % keeps a loaded
#: machine timing for three windows' time.
QUICK = {"max_seconds": 60.0, "case_seconds": 0.3, "target_spread": 9.0, "passes": 1}

#: Seconds per call of the ``"slow"`` variant.
SLOW_S = 2.0
#: Seconds per call of the ``"spin"`` variant.
SPIN_S = 25.0


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


@numba.njit
def _chain(n):
    acc = 1.0
    for i in range(n):  # a dependent chain: neither vectorised nor folded
        acc = acc * 0.999999999 + 1e-9 * (i & 1)
    return acc


@numba.njit
def _busy(x, out, iterations):
    acc = _chain(iterations)
    for i in range(out.size):
        out[i] = 2 * x[i] + 0.0 * acc  # finite acc: the result stays 2 * x


@functools.cache
def spin_iterations(seconds: float) -> int:
    """How many chain steps take about ``seconds`` here (measured once)."""
    _chain(10)
    n = 10_000_000
    t0 = time.perf_counter()
    _chain(n)
    per_step = max((time.perf_counter() - t0) / n, 1e-11)
    return int(seconds / per_step)


def _numba_generator(outs: Any, variant: str, **kw: Any) -> Any:
    if variant == "wrong":
        return pk.numba_kernel(_wrong, outs[0])
    if variant == "raises":
        raise RuntimeError("seeded build failure")
    if variant == "clobber":
        return pk.numba_kernel(_clobber, outs[0])
    if variant in ("slow", "spin"):
        busy = pk.numba_kernel(_busy, outs[0])
        n = spin_iterations(SLOW_S if variant == "slow" else SPIN_S)
        return lambda x: busy(x, iterations=n)
    kernel = pk.numba_kernel(_double, outs[0])
    passes = {"a": 1, "b": 400, "c": 1}[variant]
    return lambda x: kernel(x, passes=passes)


def make_op(
    name: str, variants: tuple[str, ...] = ("a", "b", "c"), *, reference: bool = True
) -> pk.XLACustomKernel:
    """The primitive described above (without ``reference``: no ``jax_raw``)."""
    op = pk.XLACustomKernel(name)
    if reference:
        op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    op.def_numba_kernel(_numba_generator, tune={"variant": list(variants)})
    finish(op)
    return op


def finish(op: pk.XLACustomKernel) -> None:
    """Give ``op`` the call function ``op(x)`` and the benchmark data."""
    op.def_call(
        lambda x, **kw: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), **kw)
    )
    op.def_benchmark_data(lambda *, platform: configs((1000, 100_000)))


def grid_op(name: str, size: int) -> pk.XLACustomKernel:
    """``2 * x`` with a ``jax_raw`` reference and a Numba backend whose launch
    parameters ``a`` and ``b`` take ``size`` values each (they change nothing)."""

    def generator(outs: Any, a: int, b: int) -> Any:
        kernel = pk.numba_kernel(_double, outs[0])
        return lambda x: kernel(x, passes=1)

    op = pk.XLACustomKernel(name)
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: 2 * x, platform="cpu")
    op.def_numba_kernel(
        generator, tune={"a": list(range(size)), "b": list(range(size))}
    )
    finish(op)
    return op


def configs(sizes: tuple[int, ...]) -> list[BenchmarkConfig]:
    rng = np.random.default_rng(0)
    return [
        BenchmarkConfig(f"n={n}", (rng.standard_normal(n).astype(np.float32),))
        for n in sizes
    ]


def spec(n: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((n,), jnp.float32)
