"""Triton GPU cases for ``benchmarks/bench_gpu.py`` (each compared with ``jnp.add``).

Self-contained: each ``case_*`` function builds its own kernel and data, times the
Triton launch (through an ``XLACustomKernel``, i.e. the native launcher's custom
call on XLA's stream) and ``jnp.add`` measured the same way in the same run, and
returns a dict of numbers with the issue's target next to the ratio:

* ``case_per_call_n1``: one call at N = 1 inside ``jit`` (target <= 1.2x jnp.add);
* ``case_chained_100``: 100 chained calls in one ``jit`` (target <= 3.0 us per call,
  met only if XLA captures the chain as a CUDA graph);
* ``case_bandwidth``: 2^24 floats, GB/s counted as 3 x 4 bytes per element
  (target >= 0.9x jnp.add).

Without a GPU, :func:`main` prints why and exits with status 0.
Run: ``python benchmarks/_gpu_triton_cases.py`` (``--quick``: fewer repetitions).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

QUICK = "--quick" in sys.argv
BLOCK = 1024


def gpu_available() -> bool:
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def _add_primitive(name: str) -> Any:
    """``x + y`` as a primitive whose gpu kernel is a Triton kernel."""
    import jax
    import triton
    import triton.language as tl

    import polykernel as pk

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x + tl.load(y_ptr + offs, mask=mask), mask=mask)

    def generator(outs: Any, **kwargs: Any) -> Any:
        n = int(outs[0].size)
        f = pk.triton_kernel(add, outs[0], grid=(triton.cdiv(n, BLOCK),), BLOCK=BLOCK)
        return lambda x, y: [f(x, y, n=n)]

    op = pk.XLACustomKernel(name)
    op.def_triton_kernel(generator)
    return lambda x, y: op(x, y, outs=[jax.ShapeDtypeStruct(x.shape, x.dtype)])[0]


def _time(fn: Callable[..., Any], *args: Any, reps: int) -> float:
    """Median seconds per call of a jitted ``fn`` (after a warm-up call)."""
    import jax

    jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(5 if QUICK else 20):
        t0 = time.perf_counter()
        for _ in range(reps):
            out = fn(*args)
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - t0) / reps)
    return statistics.median(samples)


def _data(n: int) -> tuple[Any, Any]:
    import jax
    import jax.numpy as jnp

    gpu = jax.devices("gpu")[0]
    x = jax.device_put(jnp.arange(n, dtype=jnp.float32), gpu)
    return x, jax.device_put(jnp.ones(n, jnp.float32), gpu)


def case_per_call_n1() -> dict[str, Any]:
    """One call at N = 1 inside ``jit``: Triton vs ``jnp.add``."""
    import jax
    import jax.numpy as jnp

    add = _add_primitive("bench.triton.add_n1")
    x, y = _data(1)
    triton_s = _time(jax.jit(add), x, y, reps=200)
    jnp_s = _time(jax.jit(jnp.add), x, y, reps=200)
    return {"case": "per call, N=1", "triton_us": triton_s * 1e6,
            "jnp_us": jnp_s * 1e6, "ratio": triton_s / jnp_s,
            "target": "<= 1.2x jnp.add"}  # fmt: skip


def case_chained_100() -> dict[str, Any]:
    """100 chained calls in one ``jit``: microseconds per call."""
    import jax
    import jax.numpy as jnp

    add = _add_primitive("bench.triton.add_chain")
    x, y = _data(1)

    def chain(op: Callable[..., Any]) -> Callable[..., Any]:
        def run(x: Any, y: Any) -> Any:
            for _ in range(100):
                x = op(x, y)
            return x

        return jax.jit(run)

    triton_s = _time(chain(add), x, y, reps=20) / 100
    jnp_s = _time(chain(jnp.add), x, y, reps=20) / 100
    return {"case": "100 chained calls", "triton_us": triton_s * 1e6,
            "jnp_us": jnp_s * 1e6, "ratio": triton_s / jnp_s,
            "target": "<= 3.0 us per call"}  # fmt: skip


def case_bandwidth(n: int = 1 << 24) -> dict[str, Any]:
    """2^24 floats: effective GB/s (read x, read y, write out)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    add = _add_primitive("bench.triton.add_bw")
    x, y = _data(n)
    np.testing.assert_allclose(np.asarray(jax.jit(add)(x, y)[:4]), [1, 2, 3, 4])
    triton_s = _time(jax.jit(add), x, y, reps=20)
    jnp_s = _time(jax.jit(jnp.add), x, y, reps=20)
    gb = 3 * 4 * n / 1e9
    return {"case": "bandwidth, 2^24 floats", "triton_GBps": gb / triton_s,
            "jnp_GBps": gb / jnp_s, "ratio": jnp_s / triton_s,
            "target": ">= 0.9x jnp.add"}  # fmt: skip


CASES = (case_per_call_n1, case_chained_100, case_bandwidth)


def run_all() -> list[dict[str, Any]]:
    """Every case's result (call only where :func:`gpu_available`)."""
    return [case() for case in CASES]


def main() -> int:
    if not gpu_available():
        print("Triton GPU benchmark: no GPU visible to JAX; nothing to measure "
              "(run on a machine with an NVIDIA GPU and jax[cuda]).")  # fmt: skip
        return 0
    import jax

    print(f"device: {jax.devices('gpu')[0].device_kind}")
    for row in run_all():
        print("  ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in row.items()))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
