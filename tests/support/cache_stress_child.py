"""Child process of the cache concurrency tests and benchmark (run as a script).

``python cache_stress_child.py KERNELS [SEED]`` builds ``KERNELS`` C++ modules and
``KERNELS`` Numba kernels, each of distinct content (kernel ``i`` adds ``i + 1``), runs
each on ``arange(8)``, compares with NumPy and prints one JSON line::

    {"ok": true, "native": [built?...], "numba": [origin...], "errors": [...]}

Every process that gets the same ``KERNELS`` builds the same kernels, so N processes
on one cache directory race for the same entries. ``origin`` of a Numba handler is
``built`` (built here and published), ``disk`` (a cache hit), ``unpublished`` or
``uncached``.
"""

from __future__ import annotations

import json
import sys

import numpy as np

SRC = """
void add(const pk::Tensor& x, pk::Tensor& y) {
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] + OFFSETf;
}
"""
NUMBA_SRC = """
import numba

@numba.njit
def add_{i}(x, out):
    for j in range(out.size):
        out[j] = x[j] + {offset}
"""


def numba_kernel(i: int):
    namespace: dict = {}
    exec(NUMBA_SRC.format(i=i, offset=float(i + 1)), namespace)
    return namespace[f"add_{i}"]


def main() -> None:
    import jax
    import jax.numpy as jnp

    import polykernel as pk
    from polykernel.backends.numba.build import loaded_handler

    count = int(sys.argv[1])
    x = jnp.arange(8, dtype=jnp.float32)
    spec = jax.ShapeDtypeStruct((8,), jnp.float32)
    report: dict = {"ok": True, "native": [], "numba": [], "errors": []}
    for i in range(count):
        want = np.arange(8, dtype=np.float32) + i + 1
        try:
            src = SRC.replace("OFFSET", f"{i + 1}.0")
            mod = pk.load_cpp_inline(f"stress_add{i}", src, ["add"])
            out = np.asarray(mod.add(x, outs=spec))
            report["native"].append(mod.built)
            report["ok"] &= bool(np.array_equal(out, want))
        except Exception as err:  # report every failure to the test
            report["ok"] = False
            report["errors"].append(f"native {i}: {type(err).__name__}: {err}")
        try:
            kernel = pk.numba_kernel(numba_kernel(i), spec)
            out = np.asarray(kernel(x))
            (target,) = kernel._targets.values()
            report["numba"].append(loaded_handler(target).origin)
            report["ok"] &= bool(np.array_equal(out, want))
        except Exception as err:
            report["ok"] = False
            report["errors"].append(f"numba {i}: {type(err).__name__}: {err}")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
