"""GPU kernels called from JAX: per-call cost, chained calls, bandwidth, cold start.

Every case (``numba_cuda``, ``triton``, ``cuda_raw``, ``pallas`` and, where
warp-lang is installed, ``warp``) builds ``f(x, y) -> x + y`` on float32 vectors;
all are measured in one run, interleaved, beside the two references:

- ``jnp.add`` (what XLA does by itself) and
- ``ffi_floor``: a minimal hand-written XLA FFI CUDA handler (``ffi_floor.cu``,
  built with nvcc and registered with ``jax.ffi`` directly) -- the least any custom
  call can cost.

Measured per case (targets in brackets, checked at the end):

- ``call``: one jitted call at N = 1, blocking on its result
  [numba_cuda, triton: <= 1.2x jnp.add];
- ``chain``: per call, 100 calls chained in one ``jit`` [<= 1.1x ffi_floor]; beside
  it the same with XLA's command buffers (CUDA graphs) turned off, in a fresh
  process, and how often the floor's handler ran per chain (fewer than 100 times:
  XLA replayed the chain from a CUDA graph it captured once);
- ``bandwidth``: GB/s at 2^24 floats, 12 bytes moved per element, 10 calls queued
  per timing [numba_cuda, triton, cuda_raw >= 0.9x jnp.add; pallas >= 0.95x];
- ``cold``: in a fresh process with empty caches, seconds from the start of the
  first call (kernel build included) to its result, and the whole process.

Needs a CUDA GPU visible to JAX; without one it says so and exits with status 2.
Run: ``python benchmarks/bench_gpu.py [--quick] [--json out.json] [--no-cold]
[--cases warp,triton]``
"""

from __future__ import annotations

import os
import tempfile

from _env import cache_environment, run_directory

_RUN_DIR = run_directory("polykernel-bench-gpu-")
for _var, _path in cache_environment(_RUN_DIR).items():
    os.environ.setdefault(_var, _path)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse  # noqa: E402
import ctypes  # noqa: E402
import functools  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _timing import time_all  # noqa: E402

BIG = 1 << 24
CHAIN = 100
CHECK = 4096  # a whole number of every case's blocks
F32 = jnp.float32
Binary = Callable[[jax.Array, jax.Array], jax.Array]


# -- the cases: each returns f(x, y) -> x + y for vectors of n floats ---------------


def _jnp_add(n: int) -> Binary:
    return jnp.add


FLOOR_TARGET = "bench_gpu_ffi_floor_add"


@functools.cache
def _floor_library() -> ctypes.CDLL:
    """Build ``ffi_floor.cu`` with nvcc and register its handler (once)."""
    source = HERE / "ffi_floor.cu"
    library = Path(_RUN_DIR) / "libffi_floor.so"
    command = ["nvcc", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
               "-arch=native", f"-I{jax.ffi.include_dir()}", str(source),
               "-o", str(library)]  # fmt: skip
    built = subprocess.run(command, capture_output=True, text=True)
    if built.returncode:
        raise RuntimeError(f"nvcc failed for {source}:\n{built.stderr[-2000:]}")
    lib = ctypes.cdll.LoadLibrary(str(library))
    lib.floor_handler_runs.restype = ctypes.c_longlong
    jax.ffi.register_ffi_target(FLOOR_TARGET, jax.ffi.pycapsule(lib.FloorAdd),
                                platform="CUDA")  # fmt: skip
    return lib


def _ffi_floor(n: int) -> Binary:
    _floor_library()
    return jax.ffi.ffi_call(FLOOR_TARGET, jax.ShapeDtypeStruct((n,), F32))


def _numba_cuda_add(n: int) -> Binary:
    from numba import cuda

    import polykernel as pk

    @cuda.jit
    def add(x, y, out):
        # 4 elements per thread, a grid apart (coalesced), all loads issued before
        # the stores: one element per thread leaves the memory idle (0.7x jnp.add).
        i, step = cuda.grid(1), cuda.gridsize(1)
        if i + 3 * step < out.size:
            a0, a1, a2, a3 = x[i], x[i + step], x[i + 2 * step], x[i + 3 * step]
            b0, b1, b2, b3 = y[i], y[i + step], y[i + 2 * step], y[i + 3 * step]
            out[i], out[i + step] = a0 + b0, a1 + b1
            out[i + 2 * step], out[i + 3 * step] = a2 + b2, a3 + b3
        else:
            for k in range(4):
                j = i + k * step
                if j < out.size:
                    out[j] = x[j] + y[j]

    out = jax.ShapeDtypeStruct((n,), F32)
    threads = 256
    blocks = -(-n // (4 * threads))
    return pk.numba_cuda_kernel(add, out, launch_dims=blocks * threads,
                                threads_per_block=threads)  # fmt: skip


def _triton_add(n: int) -> Binary:
    import triton
    import triton.language as tl

    import polykernel as pk

    block = 1024

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)

    out = jax.ShapeDtypeStruct((n,), F32)
    f = pk.triton_kernel(add, out, grid=(triton.cdiv(n, block),), BLOCK=block)
    return lambda x, y: f(x, y, n=n)


#: The cuda_raw case: the floor's kernel (add_kernel.cuh) behind a polykernel function.
CUDA_ADD = (HERE / "add_kernel.cuh").read_text() + r"""
void add(const pk::Tensor& x, const pk::Tensor& y, pk::Tensor& out,
         cudaStream_t stream) {
  int64_t n = x.numel();
  int64_t blocks = (n + 1023) / 1024;
  if (blocks > 0) {
    add_kernel<<<blocks, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                           out.data_ptr<float>(), n);
  }
  cudaError_t err = cudaGetLastError();
  PK_CHECK(err == cudaSuccess, "launch failed: " << cudaGetErrorString(err));
}
"""


def _cuda_raw_add(n: int) -> Binary:
    import polykernel as pk

    module = pk.load_cuda_inline("bench_gpu_add", CUDA_ADD, ["add"])
    out = jax.ShapeDtypeStruct((n,), F32)
    return lambda x, y: module.add(x, y, outs=out)


def _pallas_add(n: int) -> Binary:
    from jax.experimental import pallas as pl

    import polykernel as pk

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    block = min(1024, n)
    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pk.pallas_kernel(body, jax.ShapeDtypeStruct((n,), F32),
                            grid=(pl.cdiv(n, block),), in_specs=[spec, spec],
                            out_specs=spec, num_warps=4)  # fmt: skip


@functools.cache
def _warp_add_kernel() -> Any:
    """Warp's kernel, defined once (Warp keys its modules by the function's name)."""
    import warp as wp

    @wp.kernel
    def add(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
            out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = x[i] + y[i]

    return add


def _warp_add(n: int) -> Binary:
    import polykernel as pk

    return pk.warp_kernel(_warp_add_kernel(), jax.ShapeDtypeStruct((n,), F32))


#: name -> builder; ``jnp.add`` and the floor first (ratios are taken against them).
CASES: dict[str, Callable[[int], Binary]] = {
    "jnp.add": _jnp_add,
    "ffi_floor": _ffi_floor,
    "numba_cuda": _numba_cuda_add,
    "triton": _triton_add,
    "cuda_raw": _cuda_raw_add,
    "pallas": _pallas_add,
}
if importlib.util.find_spec("warp") is not None:  # not on every GPU machine
    CASES["warp"] = _warp_add
REFERENCES = ("jnp.add", "ffi_floor")
#: Targets: (metric, reference, bound, at least?) per case.
_CALL = ("call_us", "jnp.add", 1.2, False)
_CHAIN = ("chain_us", "ffi_floor", 1.1, False)
_BANDWIDTH = ("bandwidth_gbs", "jnp.add", 0.9, True)
TARGETS = {
    "numba_cuda": [_CALL, _CHAIN, _BANDWIDTH],
    "triton": [_CALL, _CHAIN, _BANDWIDTH],
    "cuda_raw": [_CHAIN, _BANDWIDTH],
    "pallas": [("bandwidth_gbs", "jnp.add", 0.95, True)],
    "warp": [_CHAIN, _BANDWIDTH],
}


def floor_runs_per_chain(chain: Callable[[], Any], repeat: int = 20) -> float:
    """How often the floor's handler ran per run of its 100-call chain."""
    runs = _floor_library().floor_handler_runs
    jax.block_until_ready(chain())
    before = runs()
    for _ in range(repeat):
        jax.block_until_ready(chain())
    return (runs() - before) / repeat


def measure(
    make: dict[str, Callable[[int], Binary]], repeat: int, chain_only: bool = False
) -> dict:
    """Per case: call_us, chain_us, bandwidth_gbs; errors are recorded."""
    gpu = jax.devices("gpu")[0]
    results: dict[str, dict] = {name: {} for name in make}
    one = jax.device_put(jnp.ones(1, F32), gpu)
    rng = np.random.default_rng(0)
    check = [jax.device_put(rng.standard_normal(CHECK).astype(np.float32), gpu)
             for _ in "xy"]  # fmt: skip
    big = jax.device_put(jnp.ones(BIG, F32), gpu)
    calls, chains, bigs = {}, {}, {}
    for name, builder in make.items():
        try:
            f1 = jax.jit(builder(1))
            got = np.asarray(jax.jit(builder(CHECK))(*check))
            np.testing.assert_allclose(got, np.asarray(check[0]) + np.asarray(check[1]))

            def chained(x, y, f1=f1):
                for _ in range(CHAIN):
                    x = f1(x, y)
                return x

            fc = jax.jit(chained)
            assert float(fc(one, one)[0]) == CHAIN + 1, "wrong chained result"
            calls[name], chains[name] = f1, fc
            if not chain_only:
                bigs[name] = jax.jit(builder(BIG))
        except Exception as exc:  # one broken case must not hide the others
            results[name]["error"] = f"{type(exc).__name__}: {exc}"[:800]
    for label, fns, args, scale, inner in (
            ("call_us", calls, (one, one), 1e6, 1),
            ("chain_us", chains, (one, one), 1e6 / CHAIN, 1),
            ("big_s", bigs, (big, big), 1.0, 10)):  # fmt: skip
        if chain_only and label != "chain_us":
            continue
        for name, seconds in time_all(fns, args, repeat, inner).items():
            results[name][label] = seconds * scale
    if "ffi_floor" in chains:
        floor = chains["ffi_floor"]
        results["ffi_floor"]["runs_per_chain"] = floor_runs_per_chain(
            lambda: floor(one, one)
        )
    for r in results.values():
        if "big_s" in r:
            r["bandwidth_gbs"] = 12 * BIG / r.pop("big_s") / 1e9
    return results


def cold_child(name: str) -> None:
    """In a fresh process: time the first call of one case (build included)."""
    gpu = jax.devices("gpu")[0]
    x = jax.device_put(jnp.ones(CHECK, F32), gpu)
    start = time.perf_counter()
    out = jax.block_until_ready(jax.jit(CASES[name](CHECK))(x, x))
    first = time.perf_counter() - start
    assert float(out[0]) == 2.0
    print(json.dumps({"first_call_s": first}))


def _child(args: list[str], **env: str) -> tuple[dict, float]:
    """Run this script in a fresh process with empty caches: (its JSON, seconds)."""
    fresh = tempfile.mkdtemp(prefix="child-", dir=_RUN_DIR)
    env = {**os.environ, **cache_environment(fresh),
           **env}  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, *args], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    wall = time.perf_counter() - start
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}, wall
    return json.loads(done.stdout.strip().splitlines()[-1]), wall


def cold(name: str) -> dict:
    report, wall = _child(["--cold-child", name])
    return {**report, "process_s": wall}


def chains_without_graphs(repeat: int, cases: str | None = None) -> dict:
    """Per case: chain_us with XLA's command buffers (CUDA graphs) turned off."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_gpu_enable_command_buffer="
    extra = ["--cases", cases] if cases else []
    report, _ = _child(["--chain-child", str(repeat), *extra], XLA_FLAGS=flags.strip())
    return report


def verdicts(results: dict) -> list[str]:
    lines = []
    for name, targets in TARGETS.items():
        if name not in results:
            continue
        for metric, ref, bound, at_least in targets:
            got, base = results[name].get(metric), results[ref].get(metric)
            if got is None or base is None:
                lines.append(f"{name} {metric}: not measured")
                continue
            ratio = got / base
            ok = ratio >= bound if at_least else ratio <= bound
            sign = ">=" if at_least else "<="
            lines.append(f"{'PASS' if ok else 'FAIL'} {name} {metric}: {ratio:.2f}x "
                         f"{ref} (target {sign} {bound})")  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold starts")
    parser.add_argument(
        "--cases", help=f"comma-separated cases (default: all of {', '.join(CASES)}; "
        "jnp.add and ffi_floor are always run: ratios are taken against them)")
    parser.add_argument("--cold-child", help=argparse.SUPPRESS)
    parser.add_argument("--chain-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        print("bench_gpu: no CUDA GPU is visible to JAX, so there is nothing to "
              "measure. Run it on a machine with an NVIDIA GPU and a CUDA-enabled "
              "jax (make test-gpu installs one).", file=sys.stderr)  # fmt: skip
        return 2
    if args.cold_child:
        cold_child(args.cold_child)
        return 0
    if args.chain_child:
        wanted = set(args.cases.split(",")) | set(REFERENCES) if args.cases else CASES
        chained = measure({k: v for k, v in CASES.items() if k in wanted},
                          args.chain_child, chain_only=True)  # fmt: skip
        print(json.dumps({n: r.get("chain_us") for n, r in chained.items()}))
        return 0
    print(f"device: {gpus[0].device_kind}; jax {jax.__version__}")
    chosen = dict(CASES)
    if args.cases:
        wanted = set(args.cases.split(",")) | set(REFERENCES)
        unknown = sorted(wanted - set(CASES))
        if unknown:
            parser.error(f"--cases: unknown {unknown}; known: {', '.join(CASES)}")
        chosen = {k: v for k, v in CASES.items() if k in wanted}
    repeat = 20 if args.quick else 200
    results = measure(chosen, repeat)
    no_graphs = chains_without_graphs(repeat, args.cases)
    for name in chosen:
        results[name]["chain_us_no_graphs"] = no_graphs.get(name)
        if not args.no_cold:
            results[name]["cold"] = cold(name)
    ref = results["jnp.add"]
    print(f"{'case':<12}{'call us':>9}{'x jnp':>7}{'chain us':>10}{'x floor':>8}"
          f"{'no graph':>9}{'GB/s':>7}{'x jnp':>7}{'cold s':>8}"
          f"{'proc s':>8}")  # fmt: skip
    floor = results["ffi_floor"].get("chain_us", float("nan"))
    for name, r in results.items():
        if "call_us" not in r:
            print(f"{name:<12} ERROR {r.get('error')}")
            continue
        c = r.get("cold", {})
        print(f"{name:<12}{r['call_us']:>9.2f}{r['call_us'] / ref['call_us']:>7.2f}"
              f"{r['chain_us']:>10.2f}{r['chain_us'] / floor:>8.2f}"
              f"{r.get('chain_us_no_graphs') or float('nan'):>9.2f}"
              f"{r['bandwidth_gbs']:>7.0f}"
              f"{r['bandwidth_gbs'] / ref['bandwidth_gbs']:>7.2f}"
              f"{c.get('first_call_s', float('nan')):>8.2f}"
              f"{c.get('process_s', float('nan')):>8.2f}")  # fmt: skip
        if "error" in c:
            print(f"{'':<12} cold start failed: {c['error']}")
    runs = results["ffi_floor"].get("runs_per_chain")
    graph = runs is not None and runs < CHAIN
    print(f"ffi_floor handler runs per {CHAIN}-call chain: {runs} "
          f"({'replayed from a CUDA graph' if graph else 'no graph replay'})")
    if "error" in no_graphs:
        print(f"chains without graphs failed: {no_graphs['error']}")
    print("\n".join(verdicts(results)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
