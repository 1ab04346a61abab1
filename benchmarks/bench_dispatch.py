"""Per-call cost of an elementwise float32 add through each way of calling a kernel.

Compares, in one run and on the same data:

- ``jnp``: plain ``x + y`` (the reference every ratio is taken against);
- ``numba_kernel``: polykernel's GIL-free Numba cfunc FFI handler (serial kernel,
  and a ``prange`` kernel at large N);
- ``pure_callback``: ``jax.pure_callback`` calling the same ``@njit`` function;
- ``cpp_ffi``: a hand-written C++ XLA FFI handler built with ``g++ -O3``;
- ``c_api_floor`` (N=1 only): the least any handler can do, in C against
  ``c_api.h``: answer the metadata query, add element 0, no checks. Its cost is
  XLA's own per-custom-call overhead, the floor for every backend;
- ``brainevent``: ``brainevent.numba_kernel`` when that package is installed
  (it needs Python >= 3.12).

Metrics: ``call`` = one ``jax.jit`` call incl. dispatch; ``chain`` = per op when
100 calls are chained in one jitted ``fori_loop``; ``vmap`` = one jitted call of
``jax.vmap`` over a batch of 64 rows of 1e3; ``f16 call`` = one jitted float16
add (``numba_kernel`` converts to float32 and back, ``numba_f32`` is the same
kernel on float32 data, so the difference is the conversion cost).

Run: ``python benchmarks/bench_dispatch.py [--quick] [--json out.json]``
"""

from __future__ import annotations

import os

from _env import cache_environment, run_directory

# Environment first: before JAX or Numba is imported anywhere.
_RUN_DIR = run_directory("polykernel-bench-")
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["NUMBA_THREADING_LAYER"] = "omp"
# On a small machine, OpenMP workers that spin after a prange region steal the cores
# XLA's own threads need for the next operation (jnp included); let them sleep.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.update(cache_environment(_RUN_DIR))

import argparse  # noqa: E402
import ctypes  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numba  # noqa: E402
import numpy as np  # noqa: E402
from _timing import time_all  # noqa: E402

from polykernel import numba_kernel  # noqa: E402

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


C_FLOOR = r"""
#include <stddef.h>
#include "xla/ffi/api/c_api.h"
XLA_FFI_Error* pk_bench_floor(XLA_FFI_CallFrame* f) {
  if (f->extension_start &&
      f->extension_start->type == XLA_FFI_Extension_Metadata) {
    XLA_FFI_Metadata* m = ((XLA_FFI_Metadata_Extension*)f->extension_start)->metadata;
    m->api_version.major_version = 0;
    m->api_version.minor_version = 3;
    m->traits = 0;
    return NULL;
  }
  if (f->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
  const float* x = ((XLA_FFI_Buffer*)f->args.args[0])->data;
  const float* y = ((XLA_FFI_Buffer*)f->args.args[1])->data;
  ((float*)((XLA_FFI_Buffer*)f->rets.rets[0])->data)[0] = x[0] + y[0];
  return NULL;
}
"""


def build_c_floor() -> str | None:
    """Compile and register the minimal C-API handler (see module doc)."""
    if shutil.which("gcc") is None:
        return None
    src = os.path.join(_RUN_DIR, "floor.c")
    lib = os.path.join(_RUN_DIR, "libpkfloor.so")
    with open(src, "w") as fh:
        fh.write(C_FLOOR)
    cmd = ["gcc", "-O2", "-shared", "-fPIC", "-I", jax.ffi.include_dir(), src,
           "-o", lib]  # fmt: skip
    subprocess.run(cmd, check=True)
    handle = ctypes.cdll.LoadLibrary(lib)
    build_c_floor.keep = handle  # type: ignore[attr-defined]
    jax.ffi.register_ffi_target(
        "pk_bench_floor", jax.ffi.pycapsule(handle.pk_bench_floor), platform="cpu"
    )
    return "pk_bench_floor"


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


def implementations(
    n: int, cpp: str | None, floor: str | None = None
) -> dict[str, Callable]:
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    impls: dict[str, Callable] = {"jnp": lambda x, y: x + y}
    impls["numba_kernel"] = numba_kernel(add_serial, spec)
    if floor and n == 1:
        impls["c_api_floor"] = jax.ffi.ffi_call(floor, spec, vmap_method="sequential")
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


def measure_half(n: int, reps: int, inner: int) -> list[dict]:
    """One jitted float16 add: jnp, numba_kernel (float32 inside), and the same
    kernel on float32 data."""
    x16 = jnp.linspace(-1, 1, n, dtype=jnp.float16)
    y16 = jnp.ones(n, jnp.float16)
    f16 = numba_kernel(add_serial, jax.ShapeDtypeStruct((n,), jnp.float16))
    f32 = numba_kernel(add_serial, jax.ShapeDtypeStruct((n,), jnp.float32))
    np.testing.assert_array_equal(np.asarray(f16(x16, y16)), np.asarray(x16 + y16))
    calls = {"jnp": jax.jit(lambda a, b: a + b), "numba_kernel": jax.jit(f16)}
    timed = time_all(calls, (x16, y16), reps, inner)
    x32, y32 = x16.astype(jnp.float32), y16.astype(jnp.float32)
    timed.update(time_all({"numba_f32": jax.jit(f32)}, (x32, y32), reps, inner))
    return [_row(name, "f16 call", n, sec) for name, sec in timed.items()]


def measure(quick: bool, sizes: list[int] | None = None) -> list[dict]:
    cpp, floor = build_cpp(), build_c_floor()
    rows = []
    sizes = sizes or ([1, 1000] if quick else [1, 1000, 1_000_000])
    for n in sizes:
        x = jnp.arange(n, dtype=jnp.float32)
        y = jnp.ones(n, jnp.float32)
        big = n >= 100_000
        impls = implementations(n, cpp, floor)
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
    for n in [s for s in sizes if s >= 1000]:
        big = n >= 100_000
        rows += measure_half(
            n, 3 if quick else 15, 3 if quick else (20 if big else 200)
        )
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


def print_summary(rows: list[dict]) -> None:
    """The ratios the targets are about (issue 10 item 6, issue 11 item 3)."""
    us = {(r["impl"], r["metric"], r["n"]): r["us"] for r in rows}
    impls = ("jnp", "numba_kernel", "c_api_floor", "cpp_ffi")
    chain = {i: us.get((i, "chain/op", 1)) for i in impls}
    if chain["jnp"] and chain["numba_kernel"]:
        print(f"chain of 100 tiny calls: numba_kernel "
              f"{chain['numba_kernel'] / chain['jnp']:.2f}x jnp per call "
              f"(target <= 1.5x)")  # fmt: skip
        for other in ("c_api_floor", "cpp_ffi"):
            if chain[other]:
                print(f"  {other}: {chain[other] / chain['jnp']:.2f}x jnp; "
                      f"numba_kernel / {other} = "
                      f"{chain['numba_kernel'] / chain[other]:.2f}")  # fmt: skip
    for (impl, metric, n), sec in sorted(us.items()):
        if impl == "numba_kernel" and metric == "f16 call":
            f32 = us[("numba_f32", metric, n)]
            print(f"float16 via float32 copies, N={n}: {sec:.2f} us vs "
                  f"{f32:.2f} us on float32 data (conversion {sec - f32:.2f} us, "
                  f"{(sec - f32) * 1e3 / n:.2f} ns/element); "
                  f"{sec / us[('jnp', metric, n)]:.2f}x jnp")  # fmt: skip


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
    print_summary(rows)
    if args.json:
        with open(args.json, "w") as fh:
            meta = {"python": sys.version, "jax": jax.__version__,
                    "tune_allocator": args.tune_allocator}  # fmt: skip
            json.dump({**meta, "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
