"""GPU kernels called from JAX: per-call cost, chained calls and bandwidth.

For every backend case (a list per backend below; each builds ``f(x, y) -> x + y``
on float32 vectors), measured in the same run as the reference ``jnp.add``:

- ``call``: one jitted call at N = 1, dispatch included (target: <= 1.2x jnp);
- ``chain``: per call, 100 calls chained in one ``jit`` (XLA may replay them as one
  CUDA graph; target: <= 3.0 us per call);
- ``bandwidth``: GB/s on 2^24 floats (12 bytes moved per element; target:
  >= 0.9x jnp).

Cases: ``jnp`` (reference), ``numba_cuda`` (``pk.numba_cuda_kernel``) and
``triton`` (``pk.triton_kernel``), both launched natively on XLA's stream. Other GPU
backends add their own lists to ``CASES``.

Needs a CUDA GPU visible to JAX; without one it says so and exits with status 2.
Run: ``python benchmarks/bench_gpu.py [--quick] [--json out.json]``
"""

from __future__ import annotations

import os
import tempfile

_RUN_DIR = tempfile.mkdtemp(prefix="polykernel-bench-gpu-")
for _var, _sub in (
    ("POLYKERNEL_CACHE_DIR", "polykernel"),
    ("NUMBA_CACHE_DIR", "numba"),
    ("TRITON_CACHE_DIR", "triton"),
):
    os.environ.setdefault(_var, os.path.join(_RUN_DIR, _sub))

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

BIG = 1 << 24
CHAIN = 100
Binary = Callable[[jax.Array, jax.Array], jax.Array]


@dataclass(frozen=True)
class Case:
    """One way of computing ``x + y`` on the GPU: ``make(n)`` returns it."""

    backend: str
    name: str
    make: Callable[[int], Binary]


def _jnp_add(n: int) -> Binary:
    return jnp.add


def _numba_cuda_add(n: int) -> Binary:
    from numba import cuda

    import polykernel as pk

    @cuda.jit
    def add(x, y, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + y[i]

    out = jax.ShapeDtypeStruct((n,), jnp.float32)
    return pk.numba_cuda_kernel(add, out, launch_dims=n, threads_per_block=256)


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

    out = jax.ShapeDtypeStruct((n,), jnp.float32)
    f = pk.triton_kernel(add, out, grid=(triton.cdiv(n, block),), BLOCK=block)
    return lambda x, y: f(x, y, n=n)


#: Per backend, its cases; ``jnp`` first (every ratio is taken against it).
CASES: dict[str, list[Case]] = {
    "jnp": [Case("jnp", "jnp.add", _jnp_add)],
    "numba_cuda": [Case("numba_cuda", "numba_cuda_kernel", _numba_cuda_add)],
    "triton": [Case("triton", "triton_kernel", _triton_add)],
}


def _time(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``fn()`` (blocking on its result), after a warm-up."""
    jax.block_until_ready(fn())
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure(case: Case, repeat: int) -> dict[str, float]:
    gpu = jax.devices("gpu")[0]
    with jax.default_device(gpu):
        one = jax.device_put(jnp.ones(1, jnp.float32), gpu)
        f1 = jax.jit(case.make(1))
        call = _time(lambda: f1(one, one), repeat)

        def chained(x, y):
            for _ in range(CHAIN):
                x = f1(x, y)
            return x

        fc = jax.jit(chained)
        chain = _time(lambda: fc(one, one), repeat) / CHAIN
        big = jax.device_put(jnp.ones(BIG, jnp.float32), gpu)
        fb = jax.jit(case.make(BIG))
        seconds = _time(lambda: fb(big, big), repeat)
    return {"call_us": call * 1e6, "chain_us": chain * 1e6,
            "bandwidth_gbs": 12 * BIG / seconds / 1e9}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--json", help="also write the results to this file")
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
    repeat = 20 if args.quick else 200
    print(f"device: {gpus[0].device_kind}; jax {jax.__version__}")
    results = {}
    for backend, cases in CASES.items():
        for case in cases:
            results[case.name] = dict(measure(case, repeat), backend=backend)
    ref = results["jnp.add"]
    print(f"{'case':<22}{'call us':>9}{'x jnp':>7}{'chain us':>10}{'GB/s':>8}"
          f"{'x jnp':>7}")  # fmt: skip
    for name, r in results.items():
        print(f"{name:<22}{r['call_us']:>9.1f}{r['call_us'] / ref['call_us']:>7.2f}"
              f"{r['chain_us']:>10.2f}{r['bandwidth_gbs']:>8.0f}"
              f"{r['bandwidth_gbs'] / ref['bandwidth_gbs']:>7.2f}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
