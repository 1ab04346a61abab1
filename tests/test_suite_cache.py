"""The run's one polykernel cache (tests/conftest.py): every process of a test run,
the pytest-xdist workers and their child processes, publishes and finds kernels in
one folder of the run, so a kernel one of them built, the others load."""

from __future__ import annotations

import os
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
from run_folders import assert_shared_by_the_run
from subprocess_support import last_json, run_python

import polykernel as pk
from polykernel import config

# A kernel no other test builds: its constant is this file's own.
KERNEL = textwrap.dedent(
    """
    import numba

    @numba.njit
    def times(x, out):
        for i in range(x.size):
            out[i] = x[i] * 3.14159265 + 0.5772156649
    """
)
CHILD = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, polykernel as pk
    from polykernel.backends.numba import build
    sys.path.insert(0, sys.argv[1])
    from suite_cache_kernel import times
    f = pk.numba_kernel(times, jax.ShapeDtypeStruct((4,), jnp.float32))
    got = f(jnp.ones(4, jnp.float32))
    print(json.dumps({"origins": [h.origin for h in build._handlers.values()],
                      "root": str(pk.config.cache_root()), "first": float(got[0])}))
    """
)


def test_the_run_shares_one_polykernel_cache():
    path = os.environ["POLYKERNEL_CACHE_DIR"]
    assert path == os.environ["POLYKERNEL_TEST_CACHE"] == str(config.cache_root())
    assert_shared_by_the_run(path, "polykernel-cache")


def test_a_kernel_built_here_is_loaded_from_the_runs_cache_by_a_child(
    tmp_path, run_env
):
    (tmp_path / "suite_cache_kernel.py").write_text(KERNEL)
    sys.path.insert(0, str(tmp_path))
    try:
        from suite_cache_kernel import times
    finally:
        sys.path.remove(str(tmp_path))
    f = pk.numba_kernel(times, jax.ShapeDtypeStruct((4,), jnp.float32))
    expected = float(np.float32(3.14159265) + np.float32(0.5772156649))
    np.testing.assert_allclose(f(jnp.ones(4, jnp.float32)), [expected] * 4)
    child = run_python("-c", CHILD, str(tmp_path), env=run_env, forked=True,
                       timeout=240)  # fmt: skip
    out = last_json(child)
    assert out["root"] == os.environ["POLYKERNEL_CACHE_DIR"]
    assert out["origins"] == ["disk"] and out["first"] == expected
