"""Per-call cost of the GPU backends' CPU paths, against jnp and numba_kernel.

Pallas part (``pallas_rows``): Pallas interpret mode is a debugging path; this
reports its cost, there is no target. Compared in one run, on the same data, for
N = 1 and N = 1e3 float32 elements inside ``jax.jit``:

- ``jnp``: plain ``x + y`` (the reference every ratio is taken against);
- ``numba_kernel``: polykernel's GIL-free Numba FFI handler (serial loop);
- ``pallas_kernel``: ``polykernel.pallas_kernel`` called directly (interpret mode);
- ``pallas_primitive``: the same kernel as the ``'cpu'`` Pallas backend of an
  ``XLACustomKernel`` (what ``backend='pallas'`` runs);
- ``pallas_grid4``: interpret mode with a grid of 4 blocks, to show what a grid
  costs there (a sequential loop of XLA ops).

Columns: ``us/call`` = median microseconds per jitted call (dispatch included),
``vs jnp`` and ``vs numba`` = that time over the reference's (1.00 = as fast,
larger = slower), ``first call ms`` = trace + lower + compile of the first call.

Run: ``python benchmarks/bench_backends.py [--quick]``
"""

from __future__ import annotations

import os
import tempfile

# Environment first: before JAX or Numba is imported anywhere.
_RUN_DIR = tempfile.mkdtemp(prefix="polykernel-bench-")
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["NUMBA_THREADING_LAYER"] = "omp"
for _var, _sub in (
    ("POLYKERNEL_CACHE_DIR", "polykernel"),
    ("NUMBA_CACHE_DIR", "numba"),
    ("WARP_CACHE_PATH", "warp"),
    ("TRITON_CACHE_DIR", "triton"),
):
    os.environ[_var] = os.path.join(_RUN_DIR, _sub)

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import polykernel as pk  # noqa: E402


def _add_body(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def _pallas_impls(n: int) -> dict[str, Callable[..., Any]]:
    import numba
    from jax.experimental import pallas as pl

    @numba.njit
    def add_serial(x, y, out):
        for i in range(out.size):
            out[i] = x[i] + y[i]

    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    op = pk.XLACustomKernel(f"bench.pallas_add_{n}")
    op.def_pallas_kernel("cpu", lambda outs, **kw: pk.pallas_kernel(_add_body, outs))
    impls: dict[str, Callable[..., Any]] = {
        "jnp": lambda x, y: x + y,
        "numba_kernel": pk.numba_kernel(add_serial, spec),
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


def format_rows(rows: list[dict[str, Any]], title: str) -> str:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    reps, inner = (5, 50) if args.quick else (15, 200)
    print(f"jax {jax.__version__}, {os.cpu_count()} CPUs, JAX_PLATFORMS=cpu")
    rows = pallas_rows(reps=reps, inner=inner)
    print(format_rows(rows, "Pallas interpret mode on CPU (no target; cost only)"))


if __name__ == "__main__":
    main()
