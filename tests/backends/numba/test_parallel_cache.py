"""``parallel=True`` kernels are cached across processes and give Numba's bits.

A parallel handler runs on polykernel's runtime library (a pthread pool with
Numba's schedule and OpenMP's assignment of pieces to threads) instead of Numba's
OpenMP layer. A reduction's partial sums are kept per thread and combined in
thread order, so any other schedule would round differently: its result must
equal, bit for bit, the kernel run by Numba itself in the same process. The
catalog's CSR scatter, whose code asks ``numba.get_num_threads()`` (an address of
Numba's threading layer, once), is cached like any other kernel.

A process with these kernels costs about 5 CPU-s (its own Numba compiles of
parallel kernels, for the reference runs, even when ours come from the cache), so
two serve every test here (:data:`PROCESSES`): one builds with 3 threads, the next
loads those builds with 4, and each checks the thread settings after the bits.
Each is a child of the test's jax zygote, which has not imported Numba: the child
imports it under its own ``NUMBA_*`` settings and starts its threading layer, as
a fresh process would.
"""

from __future__ import annotations

import os
import textwrap

import pytest
from subprocess_support import last_json, run_python

pytest.importorskip("numba")

CHILD = textwrap.dedent(
    """
    import json
    import jax, jax.numpy as jnp, numba, numpy as np
    import polykernel as pk
    from polykernel.backends.numba import build
    from polykernel.catalog.csrmv import _numba_kernels

    @numba.njit(parallel=True)
    def total(x, out):
        s = np.float32(0)
        for i in numba.prange(x.size):
            s += x[i] * np.float32(1.0001)
        out[0] = s

    @numba.njit(parallel=True)
    def grid_total(x, out):  # a 2-D loop nest: Numba's multi-dimensional schedule
        s = np.float32(0)
        for i in numba.prange(x.shape[0]):
            for j in numba.prange(x.shape[1]):
                s += x[i, j]
        out[0] = s

    scatter = _numba_kernels()[True, True]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(10_001) * 10.0 ** rng.integers(-3, 4, 10_001))
    x = x.astype(np.float32)
    grid = x[:10_000].reshape(100, 100).copy()
    rows, cols = 301, 97
    indptr = np.sort(rng.integers(0, 3000, rows + 1)).astype(np.int32)
    indptr[0] = 0
    indices = rng.integers(0, cols, indptr[-1]).astype(np.int32)
    data = rng.standard_normal(indptr[-1]).astype(np.float32)
    v = rng.standard_normal(rows).astype(np.float32)

    S = jax.ShapeDtypeStruct
    cases = {
        "total": (total, (x,), S((1,), jnp.float32)),
        "grid_total": (grid_total, (grid,), S((1,), jnp.float32)),
        "scatter": (scatter, (data, indices, indptr, v), S((cols,), jnp.float32)),
    }
    report, values = {}, {}
    for name, (kernel, args, spec) in cases.items():
        ours = np.asarray(jax.jit(pk.numba_kernel(kernel, spec))(*args))
        theirs = np.zeros(spec.shape, np.float32)
        kernel(*args, theirs)  # Numba's own parallel run, its OpenMP layer
        report[name] = {"same_bits": ours.tobytes() == theirs.tobytes()}
        values[name] = ours
    sequential = np.float32(0)
    for value in x:  # the sum in another order rounds differently
        sequential += value * np.float32(1.0001)
    report["order_matters"] = bool(sequential != values["total"][0])

    # Then (after the bits, which are taken at the process's default settings)
    # Numba's thread settings, changed here, applied to two more kernels.
    @numba.njit(parallel=True)
    def threads(x, out):
        out[0] = numba.get_num_threads()
        for i in numba.prange(1, out.size):
            out[i] = x[i]

    @numba.njit(parallel=True)
    def plain_total(x, out):
        s = np.float32(0)
        for i in numba.prange(x.size):
            s += x[i]
        out[0] = s

    f = pk.numba_kernel(threads, jax.ShapeDtypeStruct((8,), jnp.float32))
    g = pk.numba_kernel(plain_total, jax.ShapeDtypeStruct((1,), jnp.float32))
    x = jnp.ones(8, jnp.float32)
    y = np.random.default_rng(1).standard_normal(5000).astype(np.float32) * 1e3
    seen = [float(f(x)[0])]
    default = np.asarray(g(y)).tobytes()
    numba.set_num_threads(1)
    seen += [float(f(x)[0]), float(jax.jit(f)(x)[0])]
    numba.set_num_threads(3)
    numba.set_parallel_chunksize(1000)  # 5 pieces: 2, 2 and 1 per thread
    ours, theirs = np.asarray(g(y)), np.zeros(1, np.float32)
    plain_total(y, theirs)  # Numba's own run, the same setting
    report["settings"] = {"threads": seen, "chunked_like_numba":
                          ours.tobytes() == theirs.tobytes(),
                          "chunks_matter": ours.tobytes() != default}
    report["origins"] = sorted(h.origin for h in build._handlers.values())
    report["shared"] = [h.artefact is not None for h in build._handlers.values()]
    report["layer"] = numba.threading_layer()
    print(json.dumps(report))
    """
)

#: The processes, one after the other on one cache: (NUMBA_NUM_THREADS, the origin
#: of every handler). Each thread count is also what Numba's reference run uses.
#: Three threads split both loops unevenly (10,001 and 100 iterations), four split
#: the grid's 100 rows evenly. A handler runs the same library whichever process
#: linked it (the builder loads the bytes it publishes, as a later process does),
#: so the threads need not be crossed with the origins; the runtime's schedule for
#: each count is tested on its own (test_runtime.py). The loading process also has
#: a thread count its builder did not: a cached handler is no one count's.
PROCESSES = (("3", "built"), ("4", "disk"))


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, dict]:
    """Each process's report, by its thread count."""
    cache = tmp_path_factory.mktemp("parallel") / "pk"
    found = {}
    for threads, _ in PROCESSES:
        env = dict(os.environ, POLYKERNEL_CACHE_DIR=str(cache),  # as run_env
                   NUMBA_NUM_THREADS=threads, NUMBA_THREADING_LAYER="omp")  # fmt: skip
        out = run_python(code=CHILD, env=env, timeout=600, forked=True)
        found[threads] = last_json(out)
    return found


@pytest.mark.slow  # subprocesses, compiles
@pytest.mark.parametrize(
    ("threads", "origin"), PROCESSES, ids=[t for t, _ in PROCESSES]
)
def test_parallel_kernels_are_cached_and_give_numbas_bits(reports, threads, origin):
    report = reports[threads]
    assert report["origins"] == [origin] * 5, report
    assert report["shared"] == [True] * 5, report  # runtime library, no JIT
    assert report["layer"] == "omp"
    assert report["order_matters"], report
    for name in ("total", "grid_total", "scatter"):
        assert report[name] == {"same_bits": True}, (name, report)


@pytest.mark.slow  # subprocesses, compiles
@pytest.mark.parametrize("threads", [t for t, _ in PROCESSES])
def test_numbas_thread_settings_still_apply_to_kernels(reports, threads):
    # XLA runs a small program on its caller's thread, where Numba's own layer
    # used to take numba.set_num_threads/set_parallel_chunksize: the runtime
    # library follows Numba's settings wherever Numba runs: in the builder,
    # whose compiles start Numba's layer, and in the loader, whose first handlers
    # load before it starts (it is followed once Numba starts it)
    assert reports[threads]["settings"] == {
        "threads": [int(threads), 1, 1], "chunked_like_numba": True,
        "chunks_matter": True}  # fmt: skip
