"""Per-call cost of one small kernel through each CPU backend, same run, same data.

Warp part (issue 12): an elementwise float32 ``out = x + y`` at N = 1 and N = 1e3,
called inside ``jax.jit``, through

- ``jnp``: plain ``x + y`` (for scale);
- ``numba_kernel``: polykernel's Numba cfunc FFI handler (the target's yardstick);
- ``warp_kernel``: polykernel's Warp backend on CPU (native handler around Warp's
  compiled CPU entry point, no Python per call);
- ``warp.jax_kernel``: Warp's own JAX integration on CPU (a Python FFI callback per
  call), when the installed Warp offers it.

Metrics: ``call`` = one jitted call incl. dispatch; ``chain`` = per op when 100
calls are chained in one jitted ``fori_loop`` (the handler's own cost, without
dispatch). Printed ratios are ``warp_kernel / numba_kernel`` (target <= 1.3) and
``warp_kernel / warp.jax_kernel`` (target <= 1).

Pallas part (``pallas_rows``): Pallas interpret mode is a debugging path; this
reports its cost, there is no target. Same add, N = 1 and N = 1e3, inside
``jax.jit``, through ``jnp``, ``numba_kernel``, ``pallas_kernel`` called directly
(interpret mode), the same kernel as the ``'cpu'`` Pallas backend of an
``XLACustomKernel`` (``pallas_primitive``: what ``backend='pallas'`` runs), and
``pallas_grid4`` (a grid of 4 blocks: a sequential loop of XLA ops in interpret
mode). Columns: ``us/call`` = median microseconds per jitted call, ``vs jnp`` /
``vs numba`` = that time over the reference's (larger = slower), ``first call ms``
= trace + lower + compile + run of the first call.

Run: ``python benchmarks/bench_backends.py [--quick] [--json out.json]``
"""

from __future__ import annotations

import os

from _env import cache_environment, run_directory

_RUN_DIR = run_directory("polykernel-bench-")
os.environ.update(JAX_PLATFORMS="cpu", NUMBA_THREADING_LAYER="omp")
os.environ.update(cache_environment(_RUN_DIR))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402
from _timing import time_all  # noqa: E402

import polykernel as pk  # noqa: E402
from polykernel.backends.warp.types import import_warp  # noqa: E402

CHAIN = 100


@numba.njit
def add_numba(x, y, out):
    for i in range(out.size):
        out[i] = x[i] + y[i]


def _first(out):
    return out[0] if isinstance(out, tuple | list) else out


def _chained(op: Callable) -> Callable:
    def run(x, y):
        return jax.lax.fori_loop(0, CHAIN, lambda i, acc: _first(op(acc, y)), x)

    return jax.jit(run)


def warp_ops(n: int) -> dict[str, Callable]:
    """The Warp implementations available here (none without warp-lang)."""
    try:
        import warp as wp
    except ImportError:
        return {}
    import_warp()  # quiet, as polykernel sets it

    @wp.kernel
    def add_warp(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
                 out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = x[i] + y[i]

    ops = {"warp_kernel": pk.warp_kernel(add_warp, jax.ShapeDtypeStruct((n,),
                                         jnp.float32))}  # fmt: skip
    own = getattr(wp, "jax_kernel", None)
    if own is not None:
        ops["warp.jax_kernel"] = own(add_warp, num_outputs=1)
    return ops


def measure(quick: bool) -> list[dict]:
    reps, inner = (5, 200) if quick else (15, 1000)
    rows = []
    for n in (1, 1000):
        rng = np.random.default_rng(n)
        x = jnp.asarray(rng.standard_normal(n).astype(np.float32))
        y = jnp.asarray(rng.standard_normal(n).astype(np.float32))
        ops = {"jnp": jnp.add,
               "numba_kernel": pk.numba_kernel(add_numba, jax.ShapeDtypeStruct(
                   (n,), jnp.float32))}  # fmt: skip
        ops.update(warp_ops(n))
        for op in ops.values():  # every implementation agrees first
            np.testing.assert_allclose(_first(jax.jit(op)(x, y)), x + y, rtol=1e-6)
        call = time_all({k: jax.jit(op) for k, op in ops.items()}, (x, y), reps, inner)
        chain = time_all({k: _chained(op) for k, op in ops.items()}, (x, y), reps,
                         max(inner // CHAIN, 5))  # fmt: skip
        for name in ops:
            rows.append({"n": n, "impl": name, "call_us": call[name] * 1e6,
                         "chain_us": chain[name] * 1e6 / CHAIN})  # fmt: skip
    return rows


def report(rows: list[dict]) -> None:
    print(f"{'N':>6} {'implementation':<18} {'call (us)':>10} {'chain (us/op)':>14}")
    for r in rows:
        print(
            f"{r['n']:>6} {r['impl']:<18} {r['call_us']:>10.2f} {r['chain_us']:>14.3f}"
        )
    print("\nsame-run ratios (lower is better for warp_kernel):")
    for n in sorted({r["n"] for r in rows}):
        by = {r["impl"]: r for r in rows if r["n"] == n}
        if "warp_kernel" not in by:
            print(f"  N={n}: warp-lang not installed, no Warp figures")
            continue
        for peer, target in (("numba_kernel", 1.3), ("warp.jax_kernel", 1.0)):
            if peer not in by:
                continue
            for metric in ("call_us", "chain_us"):
                ratio = by["warp_kernel"][metric] / by[peer][metric]
                verdict = "ok" if ratio <= target else "ABOVE TARGET"
                print(f"  N={n:<5} warp_kernel / {peer:<16} {metric[:-3]:<6} "
                      f"{ratio:6.3f}  (target <= {target}: {verdict})")  # fmt: skip


# -- Pallas interpret mode (no target: its cost only) ---------------------------------
def _add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _pallas_impls(n: int) -> dict[str, Callable[..., Any]]:
    from jax.experimental import pallas as pl

    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    op = pk.XLACustomKernel(f"bench.pallas_add_{n}")
    op.def_pallas_kernel("cpu", lambda outs, **kw: pk.pallas_kernel(_add_body, outs))
    impls: dict[str, Callable[..., Any]] = {
        "jnp": lambda x, y: x + y,
        "numba_kernel": pk.numba_kernel(add_numba, spec),
        "pallas_kernel": pk.pallas_kernel(_add_body, spec),
        "pallas_primitive": lambda x, y: op(x, y, outs=[spec])[0],
    }
    if n % 4 == 0:
        block = pl.BlockSpec((n // 4,), lambda i: (i,))
        impls["pallas_grid4"] = pk.pallas_kernel(
            _add_body, spec, grid=(4,), in_specs=[block, block], out_specs=block
        )
    return impls


def _time_us(fn: Callable[..., Any], args: tuple, reps: int, inner: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(inner):
            out = fn(*args)
        out.block_until_ready()
        times.append((time.perf_counter() - start) / inner)
    return 1e6 * statistics.median(times)


def pallas_rows(
    sizes: tuple[int, ...] = (1, 1000), reps: int = 15, inner: int = 200
) -> list[dict[str, Any]]:
    """Time Pallas interpret mode against jnp and numba_kernel; one row per impl/N.

    Each row: ``n``, ``impl``, ``us`` (median per call), ``vs_jnp``, ``vs_numba``
    and ``first_ms`` (first call: trace, lower, compile and run).
    """
    rows = []
    for n in sizes:
        rng = np.random.default_rng(n)
        args = tuple(jnp.asarray(rng.standard_normal(n), jnp.float32) for _ in "xy")
        expected = np.asarray(args[0]) + np.asarray(args[1])
        timed = {}
        for name, impl in _pallas_impls(n).items():
            fn = jax.jit(impl)
            start = time.perf_counter()
            out = fn(*args).block_until_ready()
            first_ms = 1e3 * (time.perf_counter() - start)
            np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)
            timed[name] = (fn, first_ms)
        # Interleave the implementations so machine drift hits all alike.
        samples: dict[str, list[float]] = {name: [] for name in timed}
        for _ in range(reps):
            for name, (fn, _) in timed.items():
                samples[name].append(_time_us(fn, args, 1, inner))
        medians = {name: statistics.median(v) for name, v in samples.items()}
        for name, (_, first_ms) in timed.items():
            rows.append(
                {
                    "n": n,
                    "impl": name,
                    "us": medians[name],
                    "vs_jnp": medians[name] / medians["jnp"],
                    "vs_numba": medians[name] / medians["numba_kernel"],
                    "first_ms": first_ms,
                }
            )
    return rows


def format_pallas_rows(rows: list[dict[str, Any]], title: str) -> str:
    """A plain-text table of ``pallas_rows`` output."""
    head = (
        f"{'N':>6}  {'impl':<17} {'us/call':>9} {'vs jnp':>7} {'vs numba':>8} "
        f"{'first call ms':>13}"
    )
    lines = [title, head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['n']:>6}  {r['impl']:<17} {r['us']:>9.2f} {r['vs_jnp']:>6.2f}x "
            f"{r['vs_numba']:>7.2f}x {r['first_ms']:>13.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    rows = measure(args.quick)  # _RUN_DIR is removed at exit (run_directory)
    report(rows)
    reps, inner = (5, 50) if args.quick else (15, 200)
    pallas = pallas_rows(reps=reps, inner=inner)
    print()
    print(format_pallas_rows(pallas, "Pallas interpret mode on CPU (cost only)"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"warp": rows, "pallas": pallas}, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
