"""Child process for the multi-process Numba cache tests (run as a script).

``python numba_cache_child.py VARIANT [VARIANT ...]`` builds one kernel per variant
and prints one JSON line per variant: ``{"variant": ..., "out": [...]}``. Every
variant defines a kernel with the *same* qualified name (``k``), as kernel
generators do, so Numba hands them names that differ only in a per-process uid.
"""

from __future__ import annotations

import json
import sys

import jax
import jax.numpy as jnp
import numba
import numpy as np

from polykernel.backends.numba_cpu import numba_kernel

SCALE = 10  # a global read by the "G" variant; the parent changes it via argv


def make(variant: str):
    """Return an @njit kernel named ``k`` for ``variant``."""
    if variant == "A":

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] + 1

    elif variant == "B":

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] * 10

    elif variant.startswith("C"):  # closure constant: C3 adds 3, C4 adds 4
        c = float(variant[1:])

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] + c

    elif variant.startswith("G"):  # global: G5 multiplies by SCALE = 5
        globals()["SCALE"] = float(variant[1:])

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] * SCALE

    else:
        raise SystemExit(f"unknown variant {variant!r}")
    return k


def main(variants: list[str]) -> None:
    x = jnp.arange(4, dtype=jnp.float32)
    for variant in variants:
        f = numba_kernel(make(variant), jax.ShapeDtypeStruct((4,), jnp.float32))
        out = np.asarray(f(x)).tolist()
        print(json.dumps({"variant": variant, "out": out}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
