"""A read-only shared tier, and ``polykernel cache warm`` to make one.

A job warms its kernels into a cache (``polykernel cache warm``); that cache, given
as ``POLYKERNEL_CACHE_READONLY`` to other processes, is looked up first and never
written: their kernels load from it (after verifying key and checksums) without a
compiler, and a damaged file there is a miss that builds into the writable cache.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import zygote
from subprocess_support import last_json, run_python

MODULE = textwrap.dedent(
    """
    import jax, jax.numpy as jnp, numba, numpy as np
    import polykernel as pk
    from polykernel.benchmark import BenchmarkConfig

    CPP = '''void add2(const pk::Tensor& x, pk::Tensor& y) {
      for (int64_t i = 0; i < x.numel(); ++i)
        y.data_ptr<float>()[i] = x.data_ptr<float>()[i] + 2.0f;
    }'''

    @numba.njit
    def add2(x, out):
        for i in range(out.size):
            out[i] = x[i] + 2.0

    def _cpp(outs, **kw):
        mod = pk.load_cpp_inline("tiers_add2", CPP, ["add2"])
        return lambda x: mod.add2(x, outs=outs[0])

    op = pk.XLACustomKernel("test_tiers.add2")
    op.def_numba_kernel(lambda outs, **kw: pk.numba_kernel(add2, outs[0]))
    op.def_cuda_raw_kernel(_cpp, platform="cpu")

    def call(x, backend=None):
        spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return op(x, outs=[spec], backend=backend)[0]

    op.def_call(call)
    op.def_benchmark_data(lambda *, platform: [
        BenchmarkConfig("n=8", (np.arange(8, dtype=np.float32),))])
    """
)
PROBE = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    sys.path.insert(0, sys.argv[1])
    import tiers_module as m
    from polykernel.backends.numba.build import loaded_handler
    x = jnp.arange(8, dtype=jnp.float32)
    ok = all(np.array_equal(m.call(x, backend=b), np.arange(8) + 2.0)
             for b in ("numba", "cuda_raw"))
    import polykernel as pk
    mod = pk.load_cpp_inline("tiers_add2", m.CPP, ["add2"])
    kernel = pk.numba_kernel(m.add2, jax.ShapeDtypeStruct((8,), jnp.float32))
    kernel(x)
    (target,) = kernel._targets.values()
    print(json.dumps({"ok": ok, "native_built": mod.built, "library": mod.library,
                      "numba": loaded_handler(target).origin}))
    """
)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*") if p.is_file()}  # fmt: skip


@pytest.mark.slow
def test_a_warmed_cache_serves_other_processes_read_only(tmp_path, run_env):
    (tmp_path / "tiers_module.py").write_text(MODULE)
    shared, own = tmp_path / "shared", tmp_path / "own"
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(shared)}
    # Each process here is a child of the jax zygote: polykernel imported, no kernel
    # loaded or built yet, as in a fresh process once it imported polykernel.
    out = run_python("-m", "polykernel.cli", "cache", "warm",
                     str(tmp_path / "tiers_module.py"), env=env,
                     forked=True)  # fmt: skip
    assert "test_tiers.add2 numba n=8: ready" in out
    assert "test_tiers.add2 cuda_raw n=8: ready" in out
    before = _snapshot(shared)
    reader = {**run_env, "POLYKERNEL_CACHE_DIR": str(own),
              "POLYKERNEL_CACHE_READONLY": str(shared)}  # fmt: skip
    report = last_json(run_python("-c", PROBE, str(tmp_path), env=reader, forked=True))
    assert report["ok"] and report["native_built"] is False
    assert report["numba"] == "disk"
    assert not report["library"].startswith(str(shared))  # a private, verified copy
    assert _snapshot(shared) == before  # never written
    assert not list(own.glob("native/*/meta.json"))
    assert not list(own.glob("numba/*/meta.json"))

    # A damaged library in the shared tier is a miss: built into the own cache.
    lib = next(p for p in shared.glob("native/*/lib.so")  # not the runtime library
               if '"tiers_add2"' in (p.parent / "meta.json").read_text())  # fmt: skip
    data = lib.read_bytes()
    lib.write_bytes(data[: len(data) // 2])
    report = last_json(run_python("-c", PROBE, str(tmp_path), env=reader, forked=True))
    assert report["ok"] and report["native_built"] is True
    assert report["library"].startswith(str(own))


def test_warm_names_what_it_cannot_import(tmp_path, run_env):
    # zygote.run, not run_python: the exit status checked is not 0.
    proc = zygote.run(["-m", "polykernel.cli", "cache", "warm", "no_such_mod:fn"],
                      env=run_env, timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert "cannot import module 'no_such_mod'" in proc.stderr
