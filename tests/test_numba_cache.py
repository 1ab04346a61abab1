"""Generated handlers are cached on disk: a new process loads, never compiles."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import json, time
    t0 = time.perf_counter()
    import jax, jax.numpy as jnp, numba, numpy as np
    jax.devices("cpu")
    from polykernel.backends import _numba_build
    from polykernel.backends.numba_cpu import numba_kernel

    @numba.njit
    def add(x, y, out):
        for i in range(out.size):
            out[i] = x[i] + y[i]

    t1 = time.perf_counter()
    f = numba_kernel(add, jax.ShapeDtypeStruct((3,), jnp.float32))
    out = f(jnp.ones(3), jnp.ones(3)).block_until_ready()
    t2 = time.perf_counter()
    assert out.tolist() == [2.0, 2.0, 2.0]
    (handler,) = _numba_build._handlers.values()
    print(json.dumps({"first_call_s": t2 - t1, "hits": handler.cache_hits,
                      "kernel_compiled": len(add.signatures)}))
    """
)


def _run(env):
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_new_process_loads_handler_from_disk_cache(run_env, tmp_path):
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))
    cold = _run(env)
    warm = _run(env)
    assert cold["hits"] == 0 and cold["kernel_compiled"] == 1
    # the warm process neither compiled the handler nor the user's kernel
    assert warm["hits"] == 1 and warm["kernel_compiled"] == 0
    handlers = tmp_path / "pk" / "numba" / "handlers"
    assert len(list(handlers.glob("pk_numba_*.py"))) == 1
    assert list((handlers / "__pycache__").glob("*.nbi"))  # index inside our root
    assert (handlers.stat().st_mode & 0o077) == 0
    print(f"first call: cold {cold['first_call_s']:.2f}s, warm {warm['first_call_s']:.2f}s")
