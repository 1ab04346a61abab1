"""Per-call cost of an elementwise float32 add through each way of calling a kernel.

Compares, in one run and on the same data:

- ``jnp``: plain ``x + y`` (the reference every ratio is taken against);
- ``numba_kernel``: polykernel's GIL-free Numba cfunc FFI handler (serial kernel,
  and a ``prange`` kernel at large N);
- ``pure_callback``: ``jax.pure_callback`` calling the same ``@njit`` function;
- ``cpp_ffi``: a hand-written C++ XLA FFI handler built with ``g++ -O3``;
- ``brainevent``: ``brainevent.numba_kernel`` when that package is installed
  (it needs Python >= 3.12).

Metrics: ``call`` = one ``jax.jit`` call incl. dispatch; ``chain`` = per op when
100 calls are chained in one jitted ``fori_loop``; ``vmap`` = one jitted call of
``jax.vmap`` over a batch of 64 rows of 1e3.

Run: ``python benchmarks/bench_dispatch.py [--quick] [--json out.json]``
"""

from __future__ import annotations

import os
import tempfile

# Environment first: before JAX or Numba is imported anywhere.
_RUN_DIR = tempfile.mkdtemp(prefix="polykernel-bench-")
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["NUMBA_THREADING_LAYER"] = "omp"
# On a small machine, OpenMP workers that spin after a prange region steal the cores
# XLA's own threads need for the next operation (jnp included); let them sleep.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
for _var, _sub in (
    ("POLYKERNEL_CACHE_DIR", "polykernel"),
    ("NUMBA_CACHE_DIR", "numba"),
    ("WARP_CACHE_PATH", "warp"),
    ("TRITON_CACHE_DIR", "triton"),
):
    os.environ[_var] = os.path.join(_RUN_DIR, _sub)

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402

from polykernel.backends.numba_cpu import numba_kernel  # noqa: E402

CPP_SOURCE = r"""
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
static ffi::Error AddImpl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> y,
                          ffi::ResultBuffer<ffi::F32> out) {
  const float* a = x.typed_data();
  const float* b = y.typed_data();
  float* o = out->typed_data();
  const size_t n = out->element_count();
  for (size_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(PkBenchAdd, AddImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Arg<ffi::Buffer<ffi::F32>>()
        .Ret<ffi::Buffer<ffi::F32>>());
"""


@numba.njit
def add_serial(x, y, out):
    for i in range(out.size):
        out[i] = x[i] + y[i]


@numba.njit(parallel=True)
def add_prange(x, y, out):
    for i in numba.prange(out.size):
        out[i] = x[i] + y[i]


@numba.njit
def add_returning(x, y):
    out = np.empty_like(x)
    add_serial(x, y, out)
    return out


def build_cpp() -> str | None:
    """Compile the C++ handler into this run's temp dir; register it."""
    if shutil.which("g++") is None:
        return None
    src = os.path.join(_RUN_DIR, "add.cc")
    lib = os.path.join(_RUN_DIR, "libpkadd.so")
    with open(src, "w") as fh:
        fh.write(CPP_SOURCE)
    cmd = ["g++", "-O3", "-shared", "-fPIC", "-std=c++17", "-w",
           "-I", jax.ffi.include_dir(), src, "-o", lib]  # fmt: skip
    subprocess.run(cmd, check=True)
    handle = ctypes.cdll.LoadLibrary(lib)
    build_cpp.keep = handle  # type: ignore[attr-defined]
    jax.ffi.register_ffi_target(
        "pk_bench_cpp_add", jax.ffi.pycapsule(handle.PkBenchAdd), platform="cpu"
    )
    return "pk_bench_cpp_add"


def implementations(n: int, cpp: str | None) -> dict[str, Callable]:
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    impls: dict[str, Callable] = {"jnp": lambda x, y: x + y}
    impls["numba_kernel"] = numba_kernel(add_serial, spec)
    if n >= 100_000:
        impls["numba_kernel_prange"] = numba_kernel(add_prange, spec)
        # Writing into the first input's buffer lets XLA skip the copy a loop
        # carry otherwise needs (jnp's fused add is done in place too).
        impls["numba_prange_inplace"] = numba_kernel(
            add_prange, spec, input_output_aliases={0: 0}
        )
    impls["pure_callback"] = lambda x, y: jax.pure_callback(
        lambda a, b: add_returning(np.asarray(a), np.asarray(b)),
        spec,
        x,
        y,
        vmap_method="sequential",
    )
    if cpp:
        impls["cpp_ffi"] = jax.ffi.ffi_call(cpp, spec, vmap_method="sequential")
    try:
        import brainevent

        be = brainevent.numba_kernel(add_serial, spec, vmap_method="sequential")
        impls["brainevent"] = lambda x, y: _first(be(x, y))
    except ImportError:
        pass
    return impls


def _first(out):
    return out[0] if isinstance(out, tuple | list) else out


def time_all(fns: dict[str, Callable], args: tuple, reps: int, inner: int) -> dict:
    """Median seconds per call of each ``fn(*args)`` (blocking).

    The implementations are interleaved within each repetition, so slow drifts of
    the machine (allocator state, other load) hit all of them alike.
    """
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


def measure(quick: bool, sizes: list[int] | None = None) -> list[dict]:
    cpp = build_cpp()
    rows = []
    sizes = sizes or ([1, 1000] if quick else [1, 1000, 1_000_000])
    for n in sizes:
        x = jnp.arange(n, dtype=jnp.float32)
        y = jnp.ones(n, jnp.float32)
        big = n >= 100_000
        impls = implementations(n, cpp)
        calls = {name: jax.jit(f) for name, f in impls.items()}
        chains = {
            name: jax.jit(
                lambda a, b, f=f: jax.lax.fori_loop(0, 100, lambda i, c: f(c, b), a)
            )
            for name, f in impls.items()
        }
        reps, inner = (3, 3) if quick else ((15, 20) if big else (15, 200))
        for name, sec in time_all(calls, (x, y), reps, inner).items():
            rows.append(_row(name, "call", n, sec))
        slow = {k: v for k, v in chains.items() if k in ("pure_callback", "brainevent")}
        fast = {k: v for k, v in chains.items() if k not in slow}
        creps = 3 if quick else 9
        timed = time_all(fast, (x, y), creps, 1 if big or quick else 20)
        timed.update(time_all(slow, (x, y), creps, 1))
        for name in chains:
            rows.append(_row(name, "chain/op", n, timed[name] / 100))
    n, batch = 1000, 64
    xs = jnp.arange(batch * n, dtype=jnp.float32).reshape(batch, n)
    ys = jnp.ones((batch, n), jnp.float32)
    vm = {name: jax.jit(jax.vmap(f)) for name, f in implementations(n, cpp).items()}
    reps, inner = (3, 3) if quick else (15, 50)
    for name, sec in time_all(vm, (xs, ys), reps, inner).items():
        rows.append(_row(name, "vmap 64x", n, sec))
    return rows


def _row(impl: str, metric: str, n: int, seconds: float) -> dict:
    return {"impl": impl, "metric": metric, "n": n, "us": seconds * 1e6}


def print_table(rows: list[dict]) -> None:
    ref = {(r["metric"], r["n"]): r["us"] for r in rows if r["impl"] == "jnp"}
    print(f"python {sys.version.split()[0]}, jax {jax.__version__}, "
          f"numba {numba.__version__}, NUMBA_THREADING_LAYER "
          f"{os.environ['NUMBA_THREADING_LAYER']}")  # fmt: skip
    print(f"{'impl':<22}{'metric':<10}{'N':>9}{'median us':>12}{'x jnp':>9}")
    for r in rows:
        ratio = r["us"] / ref[(r["metric"], r["n"])]
        r["ratio_to_jnp"] = ratio
        print(
            f"{r['impl']:<22}{r['metric']:<10}{r['n']:>9}{r['us']:>12.3f}{ratio:>9.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, few reps")
    parser.add_argument("--json", metavar="PATH", help="write the numbers as JSON")
    parser.add_argument(
        "--sizes",
        type=lambda t: [int(float(v)) for v in t.split(",")],
        help="comma-separated N values (default 1,1000,1e6; --quick 1,1000)",
    )
    parser.add_argument(
        "--tune-allocator",
        action="store_true",
        help="call polykernel.tune_allocator() first: keeps freed buffers in the "
        "heap so each call's fresh 4 MB output does not page-fault (applies to "
        "every row alike, jnp included)",
    )
    args = parser.parse_args(argv)
    if args.tune_allocator:
        from polykernel import tune_allocator

        print(f"tune_allocator() applied: {tune_allocator()}")
    rows = measure(args.quick, args.sizes)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as fh:
            meta = {"python": sys.version, "jax": jax.__version__,
                    "tune_allocator": args.tune_allocator}  # fmt: skip
            json.dump({**meta, "rows": rows}, fh, indent=2)
    shutil.rmtree(_RUN_DIR, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
