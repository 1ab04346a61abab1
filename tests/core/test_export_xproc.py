"""``jax.export`` across processes: export, serialise, load elsewhere, cache hits.

One child process (``export_xproc_child.py export``) defines a Numba kernel and a
C++ module and exports three programs; the other children load them with
``pk.load_exported`` without importing any kernel code. JAX's persistent
compilation cache is shared between the children: a hit in a second process shows
that the program (target names included) is the same in every process.

The loading children (and the CUDA case's) are forks of the test process's ``jax``
zygote (``zygote.py``): new processes with NumPy, JAX and polykernel imported and
nothing else (Numba is imported by the child, under its own ``NUMBA_*``), as a
fresh one is once it imported them. The two processes whose artefacts are compared
byte for byte are fresh ones: a zygote child's programs carry the zygote's frames
below the script in their debug locations, and it shares the zygote's ``str`` hash
seed, which the second of them must not.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from subprocess_support import SUPPORT, run_python

import polykernel as pk

CHILD = SUPPORT / "export_xproc_child.py"
X = np.arange(8, dtype=np.float32)


@numba.cfunc("float64(float64)")
def triple(v):  # a cfunc object: kernels calling it have no content fingerprint
    return 3 * v


def _child(*args: object, env: dict[str, str], forked: bool = True) -> list[dict]:
    out = run_python(CHILD, *map(str, args), env=env, timeout=180, forked=forked)
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture(scope="module")
def child_env() -> dict[str, str]:
    return dict(os.environ)  # conftest's private caches, shared with the children


@pytest.fixture(scope="module")
def exported_dir(tmp_path_factory, child_env) -> tuple[Path, Path, dict]:
    """Programs exported by a first process: (directory, JAX cache, its report)."""
    directory = tmp_path_factory.mktemp("exported")
    jax_cache = directory / "jax-cache"
    # Fresh: its programs are compared byte for byte with another fresh process's.
    [report] = _child("export", directory, jax_cache, env=child_env, forked=False)
    return directory, jax_cache, report


def _blob(exported_dir, name: str) -> bytes:
    return (exported_dir[0] / f"{name}.jaxexport").read_bytes()


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_first_process_compiles_and_fills_the_persistent_cache(exported_dir):
    _, jax_cache, report = exported_dir
    assert report["out"] == (2 * X + 1).tolist()
    assert report["hits"] == 0 and report["misses"] >= 1
    assert any(jax_cache.iterdir())
    numba_target, cpp_target = report["targets"]
    assert numba_target.startswith("pk_numba_")
    assert cpp_target.startswith("xproc_mod.add_one.pk")


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_new_process_runs_it_without_kernel_code_and_hits_the_cache(
    exported_dir, child_env
):
    directory, jax_cache, first = exported_dir
    entries = [p.name for p in jax_cache.iterdir()]
    main, multi, parallel, checked, defined = _child(
        "run", directory, jax_cache, "main", "multi", "parallel", "checked",
        "+define", env=child_env,
    )  # fmt: skip
    assert not main["numba_kernels_defined"]
    assert main["out"] == (2 * X + 1).tolist()
    assert main["targets"] == first["targets"]
    # The persistent cache hit: compiled by the first process, reused here.
    assert (main["hits"], main["misses"]) == (1, 0)
    # cpu+cuda artefact, run on the CPU: the Numba kernel of the cpu branch.
    assert multi["out"] == (2 * X).tolist(), multi
    assert parallel["out"] == (3 * X).tolist()  # a prange kernel, omp layer
    # A loaded kernel that raises reports its values; the process stays usable.
    assert (
        "the kernel raised ValueError: ('too large at', 7, 7.0)" in checked["message"]
    )
    # Defining the kernels afterwards reuses the loaded targets (same names).
    assert defined["out"] == (2 * X + 1).tolist() and defined["unchanged"]
    # main wrote nothing: only the programs compiled here were added.
    after = {p.name for p in jax_cache.iterdir()}
    added = sum(r["misses"] for r in (multi, parallel, checked, defined))
    assert set(entries) <= after and len(after) == len(entries) + added


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_names_and_artefacts_are_the_same_in_every_process(
    exported_dir, child_env, tmp_path
):
    _, jax_cache, first = exported_dir
    env = {**child_env, "PYTHONHASHSEED": "12345"}  # the first ran with a random seed
    [again] = _child("export", tmp_path, jax_cache, env=env, forked=False)
    assert again["targets"] == first["targets"]
    assert (again["hits"], again["misses"]) == (1, 0)
    for name in ("main", "multi", "parallel", "checked"):
        assert (tmp_path / f"{name}.jaxexport").read_bytes() == _blob(
            exported_dir, name
        )


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_parallel_handler_runs_under_workqueue(exported_dir, child_env):
    # a shared-object handler runs on polykernel's runtime library (a thread pool
    # safe for XLA's threads), whatever Numba's layer; a JIT object is refused
    # (tests/backends/numba/test_artefact.py)
    directory, jax_cache, _ = exported_dir
    env = {**child_env, "NUMBA_THREADING_LAYER": "workqueue"}
    parallel, main = _child("run", directory, jax_cache, "parallel", "main", env=env)
    assert parallel["out"] == (3 * X).tolist()
    assert main["out"] == (2 * X + 1).tolist()


@pytest.mark.slow  # its module's child process: over 2 s in make test-fast
def test_exported_targets_lists_the_custom_calls(exported_dir):
    blob = _blob(exported_dir, "main")
    assert pk.exported_targets(blob) == exported_dir[2]["targets"]
    exported = jax.export.deserialize(bytearray(_blob(exported_dir, "multi")))
    assert exported.platforms == ("cpu", "cuda")
    assert pk.exported_targets(exported) == exported_dir[2]["targets"][:1]


def test_load_exported_in_this_process_from_the_cache(exported_dir):
    exported = pk.load_exported(_blob(exported_dir, "multi"))
    np.testing.assert_allclose(exported.call(X), 2 * X)
    assert set(pk.exported_targets(exported)) <= set(pk.list_registered_targets())


def test_missing_targets_are_named_with_the_fix(exported_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path / "empty"))
    cpp_target = exported_dir[2]["targets"][1]
    with pytest.raises(pk.KernelNotAvailableError, match=cpp_target) as info:
        pk.load_exported(_blob(exported_dir, "main"))
    assert "POLYKERNEL_CACHE_DIR" in str(info.value)
    assert "import/define the kernels" in str(info.value)
    with pytest.raises(ImportError, match=r"calls FFI target\(s\) 'pk_numba_"):
        pk.register_exported_targets(_blob(exported_dir, "parallel"))


def test_load_exported_rejects_what_is_not_an_artefact():
    with pytest.raises(pk.KernelTypeError, match=r"bytes of Exported.serialize\(\)"):
        pk.load_exported("model.jaxexport")
    with pytest.raises(TypeError, match=r"exported_targets: expected .* got int"):
        pk.exported_targets(3)
    with pytest.raises(ValueError, match=r"these 7 bytes are not an artefact"):
        pk.load_exported(b"garbage")
    with pytest.raises(pk.KernelRegistrationError, match="binary mode"):
        pk.register_exported_targets(bytes(100))


def test_export_allows_polykernel_targets_and_nothing_else():
    @numba.njit
    def negate(x, out):
        for i in range(out.size):
            out[i] = -x[i]

    spec = jax.ShapeDtypeStruct((8,), jnp.float32)
    kernel = pk.numba_kernel(negate, spec)
    with pytest.raises(ValueError, match="custom calls whose targets"):
        jax.export.export(jax.jit(kernel))(spec)
    exported = pk.export(kernel)(spec)  # plain functions are jitted
    [target] = pk.exported_targets(exported)
    check = jax.export.DisabledSafetyCheck.custom_call(target)
    assert tuple(exported.disabled_safety_checks) == (check,)
    restored = pk.load_exported(exported.serialize())
    np.testing.assert_allclose(restored.call(X), -X)

    def foreign(x):
        call = jax.ffi.ffi_call("not_a_polykernel_target", spec)
        return kernel(call(x))

    with pytest.raises(ValueError, match="not_a_polykernel_target"):
        pk.export(foreign)(spec)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_cpu_and_cuda_cpp_kernels_in_one_artefact(child_env, tmp_path):
    # Built without a GPU: the CUDA branch is registered (for CUDA) but not run.
    _child("export", tmp_path, tmp_path / "jax-cache", "cuda", env=child_env)
    [result] = _child("run", tmp_path, tmp_path / "jax-cache", "cuda_multi",
                      env=child_env)  # fmt: skip
    assert result["out"] == (X + 1).tolist()
    cuda_target, cpu_target = result["targets"]
    assert cuda_target.startswith("xproc_cuda.add_one.pk")
    assert cpu_target.startswith("xproc_mod.add_one.pk")
    assert {cuda_target, cpu_target} <= set(result["registered"])


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_export_warns_when_a_kernel_cannot_run_elsewhere():
    @numba.njit
    def boxing(x, out):  # the error boxes an array: its code needs this process
        out[:] = x
        if x[0] > 100:
            raise ValueError(np.arange(3))

    @numba.njit
    def tripled(x, out):  # calls a cfunc object: no content fingerprint
        for i in range(out.size):
            out[i] = triple(x[i])

    spec = jax.ShapeDtypeStruct((8,), jnp.float32)
    kernel = pk.numba_kernel(boxing, spec)
    with pytest.warns(pk.PolykernelWarning, match="must define the kernel before"):
        exported = pk.export(kernel)(spec)
    np.testing.assert_allclose(exported.call(X), X)
    kernel = pk.numba_kernel(tripled, spec)
    with pytest.warns(pk.PolykernelWarning, match="valid in this process only"):
        exported = pk.export(kernel)(spec)
    np.testing.assert_allclose(exported.call(X), 3 * X)
