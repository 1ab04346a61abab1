"""Cold and warm cost of a ``numba_kernel``, each measured in fresh processes.

For a CSR mat-vec kernel and a trivial add, in one run:

- ``bare``: compile + first call of the plain ``@njit`` kernel on NumPy arrays;
- ``cold``: first call of ``numba_kernel(kernel, outs)`` with an empty cache
  (Numba compile, handler IR, link, object code, cache write, JAX lowering and
  XLA compile of the calling program), with the handler steps broken down. An
  empty cache also lacks polykernel's runtime library: it adopts the copy ``pip
  install`` compiled into the package (``hatch_build.py``);
- ``cold-built``: the same where the package holds no such copy (installed
  without a C compiler): the library's one C compile, once per machine and cache,
  runs in a background thread beside Numba's compile;
- ``new``: the same for a kernel new to a cache that already holds the runtime
  library (built by an earlier process): what every kernel after a machine's first
  costs;
- ``warm``: the same in a new process with the cache filled: ``handler`` is what
  obtaining the handler costs (fingerprint, key, lookup, checksum, load,
  registration), ``first call`` adds JAX's trace and compile of the program.

Every child imports JAX, Numba and polykernel and starts JAX's CPU backend before
its clock starts, so process start-up and imports are excluded alike.
Targets: a first call with an empty cache, and a new kernel's, <= 1.1x bare (issue
36; issue 9's was 2.0x for the cold one); warm handler <= 50 ms.

Run: ``python benchmarks/bench_compile.py [--reps 5] [--kernels add] [--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap

from _env import cache_environment, run_directory, user_python

KERNELS = {
    "csrmv": """
        @numba.njit
        def kernel(data, indices, indptr, x, out):
            for i in range(out.size):
                acc = 0.0
                for j in range(indptr[i], indptr[i + 1]):
                    acc += data[j] * x[indices[j]]
                out[i] = acc

        n = 1000
        rng = np.random.default_rng(0)
        indptr = np.arange(0, 5 * n + 1, 5).astype(np.int32)
        args = (rng.random(5 * n).astype(np.float32),
                rng.integers(0, n, 5 * n).astype(np.int32), indptr,
                rng.random(n).astype(np.float32))
    """,
    "add": """
        @numba.njit
        def kernel(x, y, out):
            for i in range(out.size):
                out[i] = x[i] + y[i]

        n = 1000
        args = (np.ones(n, np.float32), np.ones(n, np.float32))
    """,
}

CHILD = """
import json, time
import jax, jax.numpy as jnp, numba, numpy as np
from polykernel import numba_kernel
jax.devices("cpu")
jnp.ones(1).block_until_ready()
{kernel}
steps = {{}}
def timed(module, name):
    fn = getattr(module, name)
    def wrapper(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            steps[name] = steps.get(name, 0.0) + time.perf_counter() - t
    setattr(module, name, wrapper)
from polykernel.backends.numba import artifact, build, compile, fingerprint, shared
from polykernel.native import runtime, runtime_recipe
if "{mode}" == "cold-built":
    runtime_recipe.SHIPPED = runtime_recipe.SHIPPED / "none"  # as if not installed
for module, name in ((compile, "compile_prepared"),
                     (runtime, "load_runtime"),
                     (shared, "emit_handler"),
                     (shared, "link_handler"),
                     (artifact, "link_artifact"),
                     (artifact, "emit_object"),
                     (artifact, "load_object"),
                     (build, "build_handler"),
                     (fingerprint, "kernel_fingerprint")):
    timed(module, name)
t0 = time.perf_counter()
if "{mode}" == "bare":
    kernel(*args, np.empty(n, np.float32))
else:
    f = numba_kernel(kernel, jax.ShapeDtypeStruct((n,), jnp.float32))
    f(*args).block_until_ready()
total = time.perf_counter() - t0
print(json.dumps({{"total": total, "steps": steps}}))
"""


def _child(kernel: str, mode: str, cache: str) -> dict:
    code = CHILD.format(kernel=textwrap.dedent(KERNELS[kernel]), mode=mode)
    env = user_python(dict(os.environ, POLYKERNEL_CACHE_DIR=cache))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


RUNTIME = "from polykernel.native.runtime import runtime_library; runtime_library()"


def _runtime_only(cache: str) -> None:
    """Fill ``cache`` with polykernel's runtime library only (another process)."""
    env = user_python(dict(os.environ, POLYKERNEL_CACHE_DIR=cache))
    subprocess.run([sys.executable, "-c", RUNTIME], env=env, check=True)


def measure(kernel: str, reps: int, run_dir: str) -> dict:
    """Median seconds (and steps) of bare / cold / new / warm over ``reps``
    rounds, the kinds interleaved in each."""
    modes = ("bare", "cold", "cold-built", "new", "warm")
    samples: dict[str, list[dict]] = {mode: [] for mode in modes}
    for rep in range(reps):
        cache = os.path.join(run_dir, f"{kernel}-{rep}")
        holds_runtime = os.path.join(run_dir, f"{kernel}-{rep}-runtime")
        _runtime_only(holds_runtime)
        samples["bare"].append(_child(kernel, "bare", cache))
        samples["cold"].append(_child(kernel, "pk", cache))
        samples["cold-built"].append(_child(kernel, "cold-built", f"{cache}-built"))
        samples["new"].append(_child(kernel, "pk", holds_runtime))
        samples["warm"].append(_child(kernel, "pk", cache))
        shutil.rmtree(cache, ignore_errors=True)
        shutil.rmtree(f"{cache}-built", ignore_errors=True)
        shutil.rmtree(holds_runtime, ignore_errors=True)
    result = {}
    for mode, runs in samples.items():
        names = sorted({s for r in runs for s in r["steps"]})
        result[mode] = {
            "total": statistics.median(r["total"] for r in runs),
            "steps": {
                s: statistics.median(r["steps"].get(s, 0.0) for r in runs)
                for s in names
            },
        }
    return result


def report(name: str, res: dict) -> None:
    bare, cold, new, warm = res["bare"], res["cold"], res["new"], res["warm"]
    ratio = cold["total"] / bare["total"]
    new_ratio = new["total"] / bare["total"]
    handler = warm["steps"].get("build_handler", 0.0)
    handler += warm["steps"].get("kernel_fingerprint", 0.0)
    print(f"{name}: bare @njit compile + first call {bare['total'] * 1e3:8.1f} ms")
    print(
        f"{name}: numba_kernel cold first call     {cold['total'] * 1e3:8.1f} ms"
        f"   ratio {ratio:.2f}x (empty cache; target <= 1.1x)"
    )
    for step, sec in cold["steps"].items():
        print(f"    {step:<20} {sec * 1e3:8.1f} ms")
    built = res["cold-built"]["total"]
    built_ratio = built / bare["total"]
    print(f"{name}: cold, the runtime library built {built * 1e3:8.1f} ms"
          f"   ratio {built_ratio:.2f}x (none compiled at install)")  # fmt: skip
    print(f"{name}: a new kernel's first call        {new['total'] * 1e3:8.1f} ms"
          f"   ratio {new_ratio:.2f}x (target <= 1.1x)")  # fmt: skip
    for step, sec in new["steps"].items():
        print(f"    {step:<20} {sec * 1e3:8.1f} ms")
    print(f"{name}: warm first call (new process)     {warm['total'] * 1e3:8.1f} ms")
    print(f"{name}: warm handler (fingerprint..load) {handler * 1e3:8.1f} ms"
          f"   (target <= 50 ms)")  # fmt: skip
    res["ratio_cold_to_bare"] = ratio
    res["ratio_new_to_bare"] = new_ratio
    res["ratio_cold_built_to_bare"] = built_ratio
    res["warm_handler_s"] = handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="fresh-process rounds")
    parser.add_argument("--json", metavar="PATH", help="write the numbers as JSON")
    parser.add_argument(
        "--kernels", nargs="+", choices=sorted(KERNELS), default=list(KERNELS),
        help="which kernels (default: all)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("NUMBA_THREADING_LAYER", "omp")
    run_dir = run_directory("polykernel-bench-compile-")
    os.environ.update(cache_environment(run_dir))  # each child's own polykernel cache
    results = {}
    for name in args.kernels:  # run_dir is removed at exit (run_directory)
        results[name] = measure(name, args.reps, run_dir)
        report(name, results[name])
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"python": sys.version, **results}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
