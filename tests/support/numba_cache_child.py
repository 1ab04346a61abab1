"""Child process for the multi-process Numba cache tests (run as a script).

``python numba_cache_child.py VARIANT [VARIANT ...]`` builds one kernel per variant
and prints one JSON line per variant: ``{"variant", "out", "origin", "target",
"uid"}`` (origin: ``built``, ``disk`` or ``uncached``; target: its FFI target name).
Every variant defines a kernel with the *same* qualified name (``k``), as kernel
generators do, so Numba hands them symbol names that differ only in a per-process
uid: ``uid`` is the one Numba was to give the next function when the variant's
turn came (the kernel's own, when it is compiled), so a test can check that a
later process gave a kernel the names an earlier one gave another.

Variants: ``A`` (x + 1), ``B`` (x * 10), ``C<n>`` (adds the closure constant n),
``G<n>`` (multiplies by the module global SCALE = n), ``H<n>`` (calls a global
``@njit`` helper adding n), ``F`` (``fastmath`` given as a set), ``N`` (allocates
with ``np.empty``, copies out with a slice assignment: that needs a Numba
environment), ``R`` (raises ValueError with run-time values: the line then has
``error`` instead of ``out``), ``X`` (calls a ctypes function: not cacheable),
``K`` (an ``@njit(cache=True)`` kernel), ``D`` (calls an ``@njit(cache=True)``
helper: not cacheable when Numba loads that helper from its own disk cache).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import re
import sys

import jax
import jax.numpy as jnp
import numba
import numpy as np
from numba.core.bytecode import FunctionIdentity

from polykernel.backends.numba import build as _numba_build, numba_kernel
from polykernel.errors import KernelExecutionError

SCALE = 10.0  # read by the G variants, set from the variant name


@numba.njit(cache=True)
def cached_helper(v):
    return v * 4


@numba.njit(cache=True)
def k(x, out):  # variant K
    for i in range(out.size):
        out[i] = x[i] - 1


def _helper(n: float):
    @numba.njit
    def helper(v):
        return v + n

    return helper


def _cfabs():
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    fabs = libm.fabs
    fabs.restype, fabs.argtypes = ctypes.c_double, [ctypes.c_double]
    return fabs


def make(variant: str):
    """Return an @njit kernel named ``k`` for ``variant``."""
    tag, arg = variant[0], variant[1:]
    if tag == "A":

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] + 1

    elif tag == "B":

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] * 10

    elif tag == "C":
        c = float(arg)

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] + c

    elif tag == "G":
        globals()["SCALE"] = float(arg)

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] * SCALE

    elif tag == "H":
        globals()["helper"] = _helper(float(arg))

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = helper(x[i])  # noqa: F821 - defined just above

    elif tag == "F":

        @numba.njit(fastmath={"nsz", "arcp", "contract", "afn", "reassoc"})
        def k(x, out):
            for i in range(out.size):
                out[i] = x[i] * 2

    elif tag == "N":

        @numba.njit
        def k(x, out):
            tmp = np.empty(out.size, np.float32)
            for i in range(out.size):
                tmp[i] = x[i] * 3
            out[:] = tmp

    elif tag == "R":

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                if x[i] >= 3:
                    raise ValueError("bad value", i, x[i])
                out[i] = x[i]

    elif tag == "K":
        return globals()["k"]

    elif tag == "D":

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = cached_helper(x[i])

    elif tag == "X":
        fabs = _cfabs()

        @numba.njit
        def k(x, out):
            for i in range(out.size):
                out[i] = fabs(x[i] - 10)

    else:
        raise SystemExit(f"unknown variant {variant!r}")
    return k


def next_uid() -> int:
    """The uid Numba gives the next function it compiles: a per-process counter
    (from 1), part of every symbol name; read from its repr, not consumed."""
    return int(re.fullmatch(r"count\((\d+)\)", repr(FunctionIdentity._unique_ids))[1])


def main(variants: list[str]) -> None:
    x = jnp.arange(4, dtype=jnp.float32)
    for variant in variants:
        uid = next_uid()
        f = numba_kernel(make(variant), jax.ShapeDtypeStruct((4,), jnp.float32))
        try:
            line = {"variant": variant, "out": np.asarray(f(x)).tolist()}
        except KernelExecutionError as err:
            line = {"variant": variant, "error": str(err)}
        (target,) = f._targets.values()
        line["origin"] = _numba_build._handlers[target].origin
        line.update(target=target, uid=uid)
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
