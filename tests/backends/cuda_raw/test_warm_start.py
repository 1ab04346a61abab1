"""A cached C++ module in a fresh process: no compiler process, no compiler package.

Issue 36: loading a module the cache holds must cost a process what finding and
opening the library costs. These tests load it in a new process whose
``subprocess.Popen``, ``os.system`` and ``os.posix_spawn*`` record every call, and
check that nothing was started and that no compiler package (numba, llvmlite, warp,
triton) was imported on the way; and that the backend table's protocol object
imports no loader module.

The processes are children of the test's jax zygote: JAX and polykernel are
imported there (and so unwatched), no compiler package nor any module of
``polykernel.backends.cuda_raw``; all that loading the module imports or starts
happens in the child, watched, as in a fresh process.
"""

from __future__ import annotations

import os
import textwrap

import pytest
import zygote
from subprocess_support import last_json, run_python
from warm_start_support import SUPPORT

COMPILER_PACKAGES = ("numba", "llvmlite", "warp", "triton")

SRC = """void warm_twice(const pk::Tensor& x, pk::Tensor& y) {
  const float* a = x.data_ptr<float>(); float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = 2 * a[i];
}"""

# Loads SRC (stdin) and calls it once under jit; prints what the process started.
CHILD = textwrap.dedent(
    """
    import json, sys
    from warm_start_support import watch_processes  # on PYTHONPATH (_load)
    started = []
    watch_processes(started)
    import jax, jax.numpy as jnp
    from polykernel import load_cpp_inline
    before = set(sys.modules)
    mod = load_cpp_inline(sys.argv[1], sys.stdin.read(), ["warm_twice"])
    x = jnp.arange(4, dtype=jnp.float32)
    f = jax.jit(lambda v: mod.warm_twice(v, outs=jax.ShapeDtypeStruct(v.shape,
                                                                      v.dtype)))
    value = f(x).tolist()
    packages = sorted(m for m in sys.argv[2:] if m in sys.modules)
    print(json.dumps({"built": mod.built, "value": value, "started": started,
                      "packages": packages,
                      "new": sorted(set(sys.modules) - before)}))
    """
)


def _load(env: dict[str, str], name: str) -> dict:
    """Run CHILD in a new process (a child of the jax zygote) on SRC; what it
    printed."""
    path = os.pathsep.join(p for p in (str(SUPPORT), env.get("PYTHONPATH")) if p)
    proc = zygote.run(
        ["-c", CHILD, name, *COMPILER_PACKAGES], input=SRC,
        env={**env, "PYTHONPATH": path}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return last_json(proc.stdout)


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_a_cached_module_loads_with_no_process_and_no_compiler_package(
    tmp_path, run_env
):
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(tmp_path / "cache")}
    first = _load(env, "warm_start_mod")
    assert first["built"] is True and first["value"] == [0.0, 2.0, 4.0, 6.0]
    assert first["started"], "the cold load should have run the compiler"

    warm = _load(env, "warm_start_mod")
    assert warm["built"] is False
    assert warm["value"] == [0.0, 2.0, 4.0, 6.0]
    assert warm["started"] == [], f"a cache hit started processes: {warm['started']}"
    assert warm["packages"] == [], (
        f"a cache hit imported compiler packages: {warm['packages']}"
    )
    # The hit path needs neither the directory loader nor hand registration.
    assert not {"polykernel.backends.cuda_raw.directory",
                "polykernel.backends.cuda_raw.runtime"} & set(warm["new"])  # fmt: skip


def test_the_backend_object_imports_no_loader(run_env):
    code = textwrap.dedent(
        """
        import json, sys
        from polykernel import backends
        backends.lookup("cuda_raw")
        print(json.dumps(sorted(m for m in sys.modules
                                if m.startswith("polykernel.backends.cuda_raw."))))
        """
    )
    loaded = last_json(run_python(code=code, env=run_env, forked=True))
    assert loaded == ["polykernel.backends.cuda_raw.backend"]


def test_lazy_names_resolve_and_are_listed():
    import polykernel.backends.cuda_raw as cuda_raw

    for name in cuda_raw.__all__:
        assert callable(getattr(cuda_raw, name)), name
        assert name in dir(cuda_raw)
    try:
        cuda_raw.no_such_name  # noqa: B018
    except AttributeError as err:
        assert "no_such_name" in str(err)
    else:  # pragma: no cover
        raise AssertionError("an unknown name must be an AttributeError")
