"""Generated handlers are cached on disk: a new process loads, never compiles.

The processes are children of the test's jax zygote, which has not imported Numba:
each imports it and compiles (or loads) its kernels itself.
"""

from __future__ import annotations

import textwrap

import pytest
from numba_events import counting_compiles
from subprocess_support import last_json, run_python

SCRIPT = counting_compiles(
    textwrap.dedent(
        """
    import json, time
    t0 = time.perf_counter()
    import jax, jax.numpy as jnp, numba, numpy as np
    jax.devices("cpu")
    from polykernel.backends.numba import build as _numba_build
    from polykernel.backends.numba import numba_kernel
    # COUNT_COMPILES: `compiled`, what Numba compiled here (numba_events)

    @numba.njit
    def add(x, y, out):
        for i in range(out.size):
            out[i] = x[i] + y[i]

    @numba.njit(parallel=True)
    def scale(x, out):
        for i in numba.prange(out.size):
            out[i] = 3 * x[i]

    t1 = time.perf_counter()
    f = numba_kernel(add, jax.ShapeDtypeStruct((3,), jnp.float32))
    out = f(jnp.ones(3), jnp.ones(3)).block_until_ready()
    t2 = time.perf_counter()
    assert out.tolist() == [2.0, 2.0, 2.0]
    # a prange kernel loaded from the cache runs on the runtime library's threads
    g = numba_kernel(scale, jax.ShapeDtypeStruct((1000,), jnp.float32))
    assert g(jnp.ones(1000)).tolist() == [3.0] * 1000
    origins = [h.origin for h in _numba_build._handlers.values()]
    mine = sorted(n for n in compiled if n in ("add", "scale"))
    print(json.dumps({"first_call_s": t2 - t1, "origins": origins,
                      "kernel_compiled": mine}))
    """
    )
)


def _run(env):
    return last_json(run_python(code=SCRIPT, env=env, forked=True))


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_new_process_loads_handler_from_disk_cache(run_env, tmp_path):
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))
    cold = _run(env)
    warm = _run(env)
    assert cold["origins"] == ["built", "built"]
    assert cold["kernel_compiled"] == ["add", "scale"]
    # the warm process compiled neither the handlers nor the user's kernels
    assert warm["origins"] == ["disk", "disk"] and warm["kernel_compiled"] == []
    root = tmp_path / "pk" / "numba"
    entries = [p for p in root.iterdir() if p.name != "locks"]
    assert len(entries) == 2
    for entry in entries:
        assert sorted(p.name for p in entry.iterdir()) == ["handler.so", "meta.json"]
        assert (entry.stat().st_mode & 0o077) == 0
    assert (root.stat().st_mode & 0o077) == 0
    cold_s, warm_s = cold["first_call_s"], warm["first_call_s"]
    print(f"first call: cold {cold_s:.2f}s, warm (disk cache) {warm_s:.2f}s")
