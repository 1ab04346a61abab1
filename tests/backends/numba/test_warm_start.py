"""A warm start loads the cached shared object and nothing else.

In a fresh process whose user code imported Numba and defined the kernels, with
the cache filled by an earlier process, polykernel loads each handler without
Numba's code generator: no object reaches Numba's JIT (``unserialize_library``,
MCJIT), Numba's CPU target context is never asked for, no llvmlite module is
imported beyond those ``import numba`` brought, and no process is started.

Both processes are children of the test's jax zygote: JAX and polykernel are
imported already, Numba (and llvmlite) not, so the user code's ``import numba``
and every compile or load after it happen in the child, as in a fresh process.
"""

from __future__ import annotations

import textwrap

import pytest
from numba_events import counting_compiles
from subprocess_support import last_json, run_python

pytest.importorskip("numba")

CHILD = counting_compiles(
    textwrap.dedent(
        """
    import json, subprocess, sys
    import jax, jax.numpy as jnp, numba, numpy as np
    import polykernel as pk
    from polykernel.backends.numba import build
    # COUNT_COMPILES: `compiled`, what Numba compiled here (numba_events)

    @numba.njit
    def add(x, y, out):
        for i in range(out.size):
            out[i] = x[i] + y[i]

    @numba.njit(parallel=True)
    def total(x, out):
        s = np.float32(0)
        for i in numba.prange(x.size):
            s += x[i]
        out[0] = s

    calls = []

    def spy(owner, name):
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            calls.append(f"{owner.__name__}.{name}")
            return real(*args, **kwargs)

        setattr(owner, name, wrapper)

    import llvmlite.binding as ll
    from numba.core import codegen, registry

    llvmlite_before = {m for m in sys.modules if m.startswith("llvmlite")}
    spy(codegen.JITCPUCodegen, "unserialize_library")
    spy(ll, "create_mcjit_compiler")
    spy(ll.ExecutionEngine, "add_object_file")
    spy(ll.ExecutionEngine, "add_module")
    spy(subprocess.Popen, "__init__")
    context = registry.CPUTarget.target_context

    def asked(self):
        calls.append("CPUTarget.target_context")
        return context.fget(self)

    registry.CPUTarget.target_context = property(asked)

    S = jax.ShapeDtypeStruct
    x = jnp.arange(1000, dtype=jnp.float32)
    f = pk.numba_kernel(add, S((1000,), jnp.float32))
    g = pk.numba_kernel(total, S((1,), jnp.float32))
    got = jax.jit(lambda a: (f(a, a), g(a)))(x)
    assert np.asarray(got[0]).tolist() == (2 * np.arange(1000)).tolist()
    assert float(got[1][0]) == 499500.0
    print(json.dumps({
        "origins": [h.origin for h in build._handlers.values()],
        "calls": calls,
        "llvmlite": sorted({m for m in sys.modules if m.startswith("llvmlite")}
                           - llvmlite_before),
        "compiled": sorted(n for n in compiled if n in ("add", "total")),
    }))
    """
    )
)


@pytest.mark.slow  # subprocesses, compiles
def test_a_warm_start_loads_the_artefact_without_numbas_codegen(run_env, tmp_path):
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))
    cold = last_json(run_python(code=CHILD, env=env, timeout=300, forked=True))
    assert cold["origins"] == ["built", "built"]
    # the spies see what a build does: Numba's codegen and the linker's process
    assert {"CPUTarget.target_context", "Popen.__init__"} <= set(cold["calls"])
    assert cold["compiled"] == ["add", "total"]
    warm = last_json(run_python(code=CHILD, env=env, timeout=300, forked=True))
    assert warm == {
        "origins": ["disk", "disk"],
        "calls": [],
        "llvmlite": [],
        "compiled": [],
    }
