"""The main job behind ``make demo``: a short tour of polykernel on this machine.

Run with ``python -m polykernel.demo [--output DIR]``. It registers a primitive with
every backend usable here, checks that they agree, and prints the results.
"""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .primitive import XLACustomKernel


def build_saxpy() -> XLACustomKernel:
    """``out = alpha * x + y`` with a pure-JAX backend and, if installed, Numba."""
    op = XLACustomKernel("polykernel.demo.saxpy")
    op.def_jax_raw_kernel(lambda outs, alpha, **kw: lambda x, y: alpha * x + y,
                          platform="cpu")
    if importlib.util.find_spec("numba") is not None:
        op.def_kernel("numba", "cpu", _numba_saxpy_generator, asdefault=True)
    return op


def _numba_saxpy_generator(outs, alpha, **kwargs):
    import numba

    from .backends.numba_cpu import numba_kernel

    @numba.njit
    def saxpy(x, y, out):
        for i in range(out.size):
            out[i] = alpha * x[i] + y[i]

    return numba_kernel(saxpy, outs=outs[0])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polykernel.demo")
    parser.add_argument("--output", default="demo-output", help="directory for files")
    parser.parse_args(argv)
    op = build_saxpy()
    n = 8
    x = jnp.arange(n, dtype=jnp.float32)
    y = jnp.ones(n, dtype=jnp.float32)
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    expected = 2.0 * np.arange(n, dtype=np.float32) + 1.0
    print(f"primitive {op.name}: backends on cpu = {op.available_backends('cpu')}, "
          f"default = {op.get_default('cpu')}")
    for backend in op.available_backends("cpu"):
        f = jax.jit(lambda x, y, b=backend: op(x, y, outs=spec, alpha=2.0, backend=b))
        got = np.asarray(f(x, y))
        status = "ok" if np.allclose(got, expected) else "MISMATCH"
        print(f"  {backend:>8}: {got} [{status}]")
        if status != "ok":
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
