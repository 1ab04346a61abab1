"""parallel=True kernels under concurrency, and the threading-layer safeguard."""

from __future__ import annotations

import textwrap
import threading

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import zygote

from polykernel.backends.numba import numba_kernel


@numba.njit(parallel=True)
def prange_scale(x, out, k):
    for i in numba.prange(out.size):
        out[i] = x[i] * k + i


def test_python_threads_call_a_jitted_prange_kernel_concurrently():
    n = 4096
    f = jax.jit(
        lambda x, k: numba_kernel(
            prange_scale, jax.ShapeDtypeStruct((n,), jnp.float32)
        )(x, k=np.float32(3.0)),
        static_argnums=1,
    )
    x = jnp.arange(n, dtype=jnp.float32)
    want = np.arange(n, dtype=np.float32) * 3 + np.arange(n)
    f(x, 3).block_until_ready()
    errors: list[BaseException] = []

    def worker():
        try:
            for _ in range(50):
                np.testing.assert_allclose(f(x, 3), want)
        except BaseException as err:  # collected and re-raised in the main thread
            errors.append(err)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert numba.threading_layer() in ("omp", "tbb")


def _run(code, env):
    # A child of the test's jax zygote: it imports Numba itself, under its own
    # NUMBA_THREADING_LAYER (or none), and starts the layer there.
    return zygote.run(["-c", textwrap.dedent(code)], env=env, timeout=120)


LAYER = """
    import jax, jax.numpy as jnp, numba
    from polykernel.backends.numba import numba_kernel
    @numba.njit(parallel=True)
    def k(x, out):
        for i in numba.prange(out.size):
            out[i] = x[i] + 1
    f = numba_kernel(k, jax.ShapeDtypeStruct((8,), jnp.float32))
    assert f(jnp.zeros(8)).tolist() == [1.0] * 8
    print(numba.threading_layer())
"""


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_default_layer_is_made_thread_safe_at_first_use(run_env):
    env = {k: v for k, v in run_env.items() if k != "NUMBA_THREADING_LAYER"}
    proc = _run(LAYER, env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] in ("omp", "tbb")


def test_workqueue_layer_is_refused_for_parallel_kernels(run_env):
    env = dict(run_env, NUMBA_THREADING_LAYER="workqueue")
    proc = _run(LAYER, env)
    assert proc.returncode != 0
    assert "needs a thread-safe Numba threading layer" in proc.stderr
    assert "but the layer is 'workqueue'" in proc.stderr
