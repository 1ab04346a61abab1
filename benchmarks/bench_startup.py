"""A kernel's first result in a fresh process, phase by phase, per CPU backend.

For the catalog's ``scaled_add`` (10^5 elements) on each CPU backend — Numba
serial, Numba ``parallel=True``, C++ (``cuda_raw`` on the CPU) and Warp — a fresh
process runs a user's module: it imports what the user's own code imports (JAX,
NumPy, polykernel's catalog and the backend's package), then jits a function that
calls the kernel, and records the time of each phase:

- ``import``: imports and the kernel's definition (the user's own cost);
- ``trace``: ``jax.jit(f).trace(...)``;
- ``lower``: ``.lower()`` — for polykernel, where the kernel is built (empty
  cache) or loaded (filled cache) and registered;
- ``compile``: XLA's compile of the program;
- ``launch``: the first call, until its result is ready.

Each is run with an **empty** cache (a new directory for every process) and a
**filled** one (built once before), and against the **baseline**: the same module
and program with ``jnp`` in the kernel's place. Processes of all kinds are
interleaved round by round, so a drift of the machine meets all of them alike;
the table gives medians and spreads (IQR / median) per phase and polykernel's
share of the first result: the kernel's trace + lower + compile + launch minus
the baseline's. It also lists the compiler packages (numba, llvmlite, warp,
triton) a filled-cache process imported beyond those the user's module imported
itself, and the compiler processes it started.

Target (issue 36): polykernel's share <= 10 ms with a filled cache, no compiler
package imported and no compiler started on that path.

Run: ``python benchmarks/bench_startup.py [--reps 7] [--backends ...] [--json F]``
(``--child`` is this script's own role in a fresh process).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _env import cache_environment

#: backend -> (the package its user imports, the call's keywords)
BACKENDS = {
    "numba": ("numba", {"backend": "numba", "parallel": False}),
    "numba_parallel": ("numba", {"backend": "numba", "parallel": True}),
    "cpp": (None, {"backend": "cuda_raw", "grain": 0}),
    "warp": ("warp", {"backend": "warp"}),
}
COMPILERS = ("numba", "llvmlite", "warp", "triton")
PHASES = ("import", "trace", "lower", "compile", "launch")
N = 100_000


def child(backend: str, kind: str) -> None:
    """One fresh process: the phases of one first result, as JSON on stdout."""
    started = time.perf_counter()
    spawned: list[str] = []
    real_popen = subprocess.Popen.__init__

    def counting(self, args, *rest, **kw):  # a compiler process is a Popen
        spawned.append(str(args if isinstance(args, str) else args[0]))
        real_popen(self, args, *rest, **kw)

    subprocess.Popen.__init__ = counting  # type: ignore[method-assign]
    package, keywords = BACKENDS[backend]
    import jax
    import jax.numpy as jnp
    import numpy as np

    from polykernel.catalog import scaled_add_p

    if package is not None:
        __import__(package)
    user_modules = {m for m in COMPILERS if m in sys.modules}
    x = np.ones(N, np.float32)
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)

    def kernel(a, b):
        return scaled_add_p(a, b, outs=spec, alpha=2.0, **keywords)

    def baseline(a, b):
        return 2.0 * a + b

    fn = jax.jit(kernel if kind == "kernel" else baseline)
    marks = {"import": time.perf_counter() - started}
    t = time.perf_counter()
    traced = fn.trace(x, x)
    marks["trace"] = time.perf_counter() - t
    t = time.perf_counter()
    lowered = traced.lower()
    marks["lower"] = time.perf_counter() - t
    t = time.perf_counter()
    compiled = lowered.compile()
    marks["compile"] = time.perf_counter() - t
    t = time.perf_counter()
    out = compiled(x, x)
    jax.block_until_ready(out)
    marks["launch"] = time.perf_counter() - t
    assert float(np.asarray(out)[0]) == 3.0
    extra = sorted(m for m in COMPILERS if m in sys.modules and m not in user_modules)
    print(json.dumps({"marks": marks, "imported": extra, "spawned": spawned}))
    del jnp


def _run(backend: str, kind: str, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", backend, kind],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{backend} {kind}: exit {done.returncode}\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _stats(values: list[float]) -> tuple[float, float]:
    median = statistics.median(values)
    if len(values) < 4 or median == 0:
        return median, 0.0
    q = statistics.quantiles(values, n=4)
    return median, (q[2] - q[0]) / median


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    chosen = [b for b in args.backends.split(",") if b]
    runs: dict[tuple[str, str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="pk-startup-") as tmp:
        base = {**os.environ, "JAX_PLATFORMS": "cpu", "NUMBA_THREADING_LAYER": "omp"}
        filled = {**base, **cache_environment(os.path.join(tmp, "filled"))}
        for backend in chosen:  # fill the cache once
            _run(backend, "kernel", filled)
        for rep in range(args.reps):
            for backend in chosen:
                empty_dir = os.path.join(tmp, f"empty-{rep}-{backend}")
                empty = {**base, **cache_environment(empty_dir)}
                for cache, env in (("filled", filled), ("empty", empty)):
                    for kind in ("kernel", "baseline"):
                        runs.setdefault((backend, cache, kind), []).append(
                            _run(backend, kind, env)
                        )
                shutil.rmtree(empty_dir, ignore_errors=True)
    rows = []
    for (backend, cache, kind), results in sorted(runs.items()):
        row = {"backend": backend, "cache": cache, "kind": kind}
        for phase in PHASES:
            row[phase] = _stats([r["marks"][phase] for r in results])
        first = [sum(r["marks"][p] for p in PHASES[1:]) for r in results]
        row["first result"] = _stats(first)
        row["imported"] = sorted({m for r in results for m in r["imported"]})
        row["spawned"] = sorted({s for r in results for s in r["spawned"]})
        rows.append(row)
    print(f"{'backend':<15}{'cache':<7}{'kind':<9}"
          + "".join(f"{p:>14}" for p in (*PHASES, "first result")))  # fmt: skip
    for row in rows:
        cells = "".join(
            f"{row[p][0] * 1e3:8.1f} ±{row[p][1] * 100:3.0f}%"
            for p in (*PHASES, "first result")
        )
        print(f"{row['backend']:<15}{row['cache']:<7}{row['kind']:<9}{cells}")
    print("\npolykernel's share of the first result (kernel - baseline, medians):")
    for backend in chosen:
        for cache in ("filled", "empty"):
            k = next(r for r in rows if r["backend"] == backend and r["cache"] == cache
                     and r["kind"] == "kernel")  # fmt: skip
            b = next(r for r in rows if r["backend"] == backend and r["cache"] == cache
                     and r["kind"] == "baseline")  # fmt: skip
            share = (k["first result"][0] - b["first result"][0]) * 1e3
            print(f"  {backend:<15}{cache:<7}{share:8.1f} ms   imported beyond the "
                  f"user's: {k['imported'] or 'none'}; processes started: "
                  f"{k['spawned'] or 'none'}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
