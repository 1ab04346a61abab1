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

Run: ``python benchmarks/bench_backends.py [--quick] [--json out.json]``
"""

from __future__ import annotations

import os
import tempfile

_RUN_DIR = tempfile.mkdtemp(prefix="polykernel-bench-")
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["NUMBA_THREADING_LAYER"] = "omp"
for _var, _sub in (
    ("POLYKERNEL_CACHE_DIR", "polykernel"),
    ("NUMBA_CACHE_DIR", "numba"),
    ("WARP_CACHE_PATH", "warp"),
):
    os.environ[_var] = os.path.join(_RUN_DIR, _sub)

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402

import polykernel as pk  # noqa: E402
from polykernel.backends.warp.types import import_warp  # noqa: E402

CHAIN = 100


@numba.njit
def add_numba(x, y, out):
    for i in range(out.size):
        out[i] = x[i] + y[i]


def time_all(fns: dict[str, Callable], args: tuple, reps: int, inner: int) -> dict:
    """Median seconds per call of each ``fn(*args)``, implementations interleaved."""
    for fn in fns.values():
        jax.block_until_ready(fn(*args))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                out = fn(*args)
            jax.block_until_ready(out)
            samples[name].append((time.perf_counter() - t0) / inner)
    return {name: statistics.median(v) for name, v in samples.items()}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    try:
        rows = measure(args.quick)
        report(rows)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=2)
    finally:
        shutil.rmtree(_RUN_DIR, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
