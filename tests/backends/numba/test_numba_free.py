"""An exported program runs its cached Numba kernels where Numba cannot import.

One process defines a serial, a ``parallel=True`` (a prange reduction) and a
raising kernel and exports a program of each; another, where ``import numba`` and
``import llvmlite`` fail, loads them with ``pk.load_exported`` from the cache
alone: the shared objects and polykernel's runtime library, nothing else. The
results are the first process's, bit for bit, and the kernel's exception reads
the same. A third process, where Numba could import, never imports it.

Each process is a child of the test's jax zygote, which imported JAX and
polykernel but not Numba (``import polykernel`` imports no optional package, so
blocking Numba after it is blocking it before); the kernels it loads are read
from the cache as in a fresh process.
"""

from __future__ import annotations

import textwrap

import pytest
from subprocess_support import last_json, run_python

pytest.importorskip("numba")

EXPORT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import jax, jax.numpy as jnp, numba, numpy as np
    import polykernel as pk

    @numba.njit
    def twice(x, out):
        for i in range(out.size):
            out[i] = 2 * x[i]

    @numba.njit(parallel=True)
    def total(x, out):
        s = np.float32(0)
        for i in numba.prange(x.size):
            s += x[i] * x[i]
        out[0] = s

    @numba.njit
    def checked(x, out):
        for i in range(out.size):
            if x[i] > 900:
                raise ValueError("too large at", i, x[i])
            out[i] = x[i]

    N = 1000
    S = jax.ShapeDtypeStruct
    x = np.linspace(-30, 30, N).astype(np.float32)
    kernels = {"twice": (twice, S((N,), jnp.float32)),
               "total": (total, S((1,), jnp.float32)),
               "checked": (checked, S((N,), jnp.float32))}
    report = {}
    for name, (kernel, spec) in kernels.items():
        fn = jax.jit(pk.numba_kernel(kernel, spec))
        exported = pk.export(fn)(S((N,), jnp.float32))
        Path(sys.argv[1], name).write_bytes(exported.serialize())
        report[name] = np.asarray(fn(x)).tolist()
    try:
        np.asarray(jax.jit(pk.numba_kernel(checked, S((N,), jnp.float32)))(x + 1000))
    except Exception as err:  # XLA's error, holding the kernel's
        report["error"] = str(err).split("INTERNAL: ", 1)[-1].splitlines()[0]
    print(json.dumps(report))
    """
)

LOAD = textwrap.dedent(
    """
    import sys
    if sys.argv[2] == "blocked":  # every import of them raises ImportError
        sys.modules["numba"] = None
        sys.modules["llvmlite"] = None
    import json
    from pathlib import Path
    import jax, numpy as np
    import polykernel as pk

    N = 1000
    x = np.linspace(-30, 30, N).astype(np.float32)
    report = {}
    for name in ("twice", "total", "checked"):
        exported = pk.load_exported(Path(sys.argv[1], name).read_bytes())
        report[name] = np.asarray(exported.call(x)).tolist()
    try:
        np.asarray(pk.load_exported(Path(sys.argv[1], "checked").read_bytes())
                   .call(x + 1000))
    except Exception as err:
        report["error"] = str(err)
    report["imported"] = sorted(
        m for m, v in sys.modules.items()
        if m.split(".")[0] in ("numba", "llvmlite") and v is not None
    )
    print(json.dumps(report))
    """
)


@pytest.mark.slow  # subprocesses, compiles
def test_cached_kernels_run_where_numba_cannot_import(run_env, tmp_path):
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))
    want = last_json(
        run_python("-c", EXPORT, str(tmp_path), env=env, timeout=300, forked=True)
    )
    assert want["error"].startswith(
        "polykernel numba_kernel 'checked': the kernel "
        "raised ValueError: ('too large at', 0, "
    )
    for mode in ("blocked", "importable"):
        got = last_json(
            run_python(
                "-c", LOAD, str(tmp_path), mode, env=env, timeout=300, forked=True
            )
        )
        assert got["imported"] == [], (mode, got["imported"])
        for name in ("twice", "total", "checked"):
            assert got[name] == want[name], (mode, name)
        assert want["error"] in got["error"], (mode, got["error"])
