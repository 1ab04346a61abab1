"""Export a program that calls a Numba and a C++ kernel; run it in a new process.

The first process defines the kernels, exports ``jax.jit(step)`` with
``pk.export`` and writes ``exported.serialize()`` to a file. A second process (this
script again, with ``--load FILE``) has none of the kernel code: ``pk.load_exported``
finds both FFI targets by their content-derived names in polykernel's cache and
registers them. Both processes share JAX's persistent compilation cache, so the
second one loads the compiled program instead of compiling it.

Run: ``python examples/export_across_processes.py``
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import jax
import numpy as np

import polykernel as pk

N = 16
SPEC = jax.ShapeDtypeStruct((N,), np.float32)
CPP = r"""
void clip_unit(const pk::Tensor& x, pk::Tensor& y) {
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] < -1 ? -1 : (a[i] > 1 ? 1 : a[i]);
}
"""
HIT = "/jax/compilation_cache/cache_hits"
events: list[str] = []


def use_persistent_cache(directory: Path) -> None:
    """JAX's persistent compilation cache, for every program however fast."""
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    jax.monitoring.register_event_listener(lambda event, **_: events.append(event))


def expected(x: np.ndarray) -> np.ndarray:
    return np.clip(0.5 * x, -1.0, 1.0)


def export_program(path: Path) -> None:
    """Process 1: define the kernels, export, serialise, run once."""
    import numba

    @numba.njit
    def halve(x, out):
        for i in range(out.size):
            out[i] = 0.5 * x[i]

    half = pk.numba_kernel(halve, SPEC)
    clip = pk.load_cpp_inline("examples.clip", CPP, ["clip_unit"])

    def step(x):
        return clip.clip_unit(half(x), outs=SPEC)

    exported = pk.export(jax.jit(step))(SPEC)
    path.write_bytes(exported.serialize())
    print("exported targets:", pk.exported_targets(exported))
    x = np.linspace(-4, 4, N, dtype=np.float32)
    np.testing.assert_allclose(jax.jit(exported.call)(x), expected(x))


def load_and_run(path: Path) -> None:
    """Process 2: no kernel code here; the targets come from polykernel's cache."""
    exported = pk.load_exported(path.read_bytes())
    x = np.linspace(-4, 4, N, dtype=np.float32)
    y = jax.jit(exported.call)(x)
    np.testing.assert_allclose(y, expected(x))
    assert events.count(HIT) == 1, f"expected a persistent cache hit, got {events}"
    print("new process: result OK, compiled program loaded from JAX's cache")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path, jax_cache = Path(tmp) / "step.jaxexport", Path(tmp) / "jax-cache"
        use_persistent_cache(jax_cache)
        export_program(path)
        # The same environment (POLYKERNEL_CACHE_DIR included) for the new process.
        subprocess.run(
            [sys.executable, __file__, "--load", str(path), str(jax_cache)],
            check=True,
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--load"]:
        use_persistent_cache(Path(sys.argv[3]))
        load_and_run(Path(sys.argv[2]))
    else:
        main()
