"""A Numba kernel is built once into a shared object that loads without Numba.

The handler is linked into ``handler.so`` (calling polykernel's runtime library
and the CPython C API by name), cached with its requirements, found by its target
name and opened with :mod:`ctypes`. A requirement this process does not meet, or a
library that does not load, is a miss and a rebuild, never a crash; without a C
compiler the handler is an object file in Numba's JIT, as before.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocess_support import REPO, SUPPORT, run_python

from polykernel.backends.numba import build, cache, numba_kernel
from polykernel.errors import KernelExecutionError
from polykernel.ffi import artefact, targets
from polykernel.native import runtime

numba = pytest.importorskip("numba")
S = jax.ShapeDtypeStruct
CHILD = SUPPORT / "numba_cache_child.py"


class KernelSaysNo(Exception):
    """A user's exception class, raised by a kernel."""


@numba.njit
def halve(x, out):
    for i in range(out.size):
        out[i] = x[i] / 2


@numba.njit(boundscheck=True)
def past_the_end(x, out):
    for i in range(out.size + 1):
        out[i] = x[i]


@numba.njit
def refuses(x, out):
    for i in range(out.size):
        if x[i] > 1:
            raise KernelSaysNo("no to", x[i], "at", i)
        out[i] = x[i]


def _handler(kernel, n: int = 4) -> build.Handler:
    f = numba_kernel(kernel, S((n,), jnp.float32))
    with contextlib.suppress(KernelExecutionError):  # built and loaded all the same
        np.asarray(f(jnp.zeros(n, jnp.float32)))
    (target,) = f._targets.values()
    return build.loaded_handler(target)


def test_the_handler_is_a_shared_object_recorded_with_its_artefact():
    handler = _handler(halve)
    assert handler.origin in ("built", "disk")
    found = cache.find(handler.target)
    assert found is not None and found.path.name == "handler.so"
    record = targets.lookup(handler.target, "cpu")
    art = record.artefact
    assert art is not None and record.portable
    assert (art.target, art.symbol, art.backend) == (handler.target,) * 2 + ("numba",)
    assert art.sha256 == artefact.file_sha256(art.library)
    assert art.sha256 == found.meta["files"]["handler.so"]["sha256"]
    assert art.requires == artefact.Requirements.here(
        ffi=cache.ffi_digest(), runtime=True
    )
    assert art.extra == {"runtime": True}
    # what a bundle does: open the runtime, then the handler, by path
    runtime.load_runtime()
    library = artefact.load_library(found.path)
    assert artefact.symbol_address(library, handler.target) != 0


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_its_undefined_symbols_are_the_runtime_the_c_api_and_the_c_library():
    names = set()
    for kernel in (halve, refuses, past_the_end):
        found = cache.find(_handler(kernel).target)
        out = subprocess.run(
            ["nm", "-D", "--undefined-only", str(found.path)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        names |= {line.split()[-1].split("@")[0] for line in out.splitlines()}
    runtime_names = set(runtime.RENAMES.values())
    other = {n for n in names - runtime_names - runtime.CAPI if not n.startswith("_")}
    assert names & runtime_names  # it raises through the runtime library
    assert other <= {"malloc", "free", "memcpy", "memset", "memmove", "printf"}, other
    assert not {n for n in names if n.startswith(("numba", "NRT_"))}


def test_a_kernels_exceptions_read_as_numbas_own():
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(IndexError) as numba_says:
        past_the_end(x, np.zeros(4, np.float32))
    f = numba_kernel(past_the_end, S((4,), jnp.float32))
    with pytest.raises(KernelExecutionError) as ours:
        f(jnp.asarray(x))
    assert f"the kernel raised IndexError: {numba_says.value}" in str(ours.value)
    g = numba_kernel(refuses, S((4,), jnp.float32))
    with pytest.raises(
        KernelExecutionError,
        match=r"'refuses': the kernel raised "
        r"KernelSaysNo: \('no to', 2\.0, 'at', 2\)",
    ):
        g(jnp.asarray(x))


# -- in new processes: misses are rebuilds, never crashes -----------------------------
def _rows(env: dict, *variants: str) -> dict[str, dict]:
    # A child of the test's jax zygote: it imports Numba itself, so its
    # dispatchers and uids start empty, and it finds only what is on disk.
    out = run_python(CHILD, *variants, env=env, timeout=300, forked=True)
    return _read_rows(out)


def _read_rows(out: str) -> dict[str, dict]:
    """The cache child's lines in ``out`` (its stdout), by variant."""
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {r["variant"]: r for r in rows}


def _child(env: dict, *variants: str) -> dict[str, str]:
    return {v: r["origin"] for v, r in _rows(env, *variants).items()}


def _entries(root: Path) -> dict[str, Path]:
    """The entries of the Numba cache under ``root``, by the target each holds."""
    found = [p for p in (root / "numba").iterdir() if (p / "meta.json").is_file()]
    entries = {json.loads((p / "meta.json").read_text())["entry"]: p for p in found}
    assert len(entries) == len(found), found  # never two for one target
    return entries


def _edit(entry: Path, **requires) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    meta["requires"].update(requires)
    (entry / "meta.json").write_text(json.dumps(meta))


def _unloadable(entry: Path) -> None:
    """A library that does not load, its checksum made to match."""
    library = entry / "handler.so"
    data = b"\x7fELF" + os.urandom(200)
    library.write_bytes(data)
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"]["handler.so"] = {
        "size": len(data),
        "sha256": artefact.file_sha256(library),
    }
    (entry / "meta.json").write_text(json.dumps(meta))


def _missing_isa() -> str | None:
    host = artefact.host_isa()
    lacking = sorted(artefact.ISA_FLAGS - host) if host is not None else []
    return lacking[0] if lacking else None


@pytest.mark.slow  # subprocesses, compiles
def test_an_entry_this_machine_cannot_load_is_rebuilt(run_env, tmp_path):
    # each fault on the entry of a kernel of its own: one process builds them all,
    # a later one meets every fault (and rebuilds), a third loads what it rebuilt
    faults = {
        "A": functools.partial(_edit, ffi="0" * 32),
        "B": functools.partial(_edit, machine="sparc-sunos"),
    }
    if flag := _missing_isa():
        faults["C1"] = functools.partial(_edit, isa=[flag])
    faults["C2"] = _unloadable
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))
    first = _rows(env, *faults)
    assert {v: r["origin"] for v, r in first.items()} == dict.fromkeys(faults, "built")
    built = _entries(tmp_path / "pk")
    assert sorted(built) == sorted(r["target"] for r in first.values())
    for variant, fault in faults.items():
        fault(built[first[variant]["target"]])
    # replaced, not kept (nor stored beside)
    assert _child(env, *faults) == dict.fromkeys(faults, "built")
    assert _child(env, *faults) == dict.fromkeys(faults, "disk")
    assert _entries(tmp_path / "pk") == built


def _without_a_c_compiler(run_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """``run_env`` with an empty ``PATH`` (no cc to link with) and its own cache."""
    bare = tmp_path / "bin"
    bare.mkdir()
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"), PATH=str(bare))
    for name in ("CC", "CXX"):
        env.pop(name, None)
    return env


#: One process for both tests below (a fresh one costs about 2 CPU-s before its
#: kernels): the cache child's A and N, with the build's log on stderr, then a
#: parallel kernel, exported to the file argv[1].
WITHOUT_A_C_COMPILER = f"""
import logging, runpy, sys
from pathlib import Path
logging.basicConfig(level=logging.WARNING)
logging.getLogger('polykernel.backends.numba.build').setLevel(logging.DEBUG)
blob = Path(sys.argv[1])
sys.argv = [{str(CHILD)!r}, 'A', 'N']
runpy.run_path({str(CHILD)!r}, run_name='__main__')

import jax, jax.numpy as jnp, numba
import polykernel as pk

@numba.njit(parallel=True)
def thrice(x, out):
    for i in numba.prange(out.size):
        out[i] = 3 * x[i]

spec = jax.ShapeDtypeStruct((8,), jnp.float32)
exported = pk.export(jax.jit(pk.numba_kernel(thrice, spec)))(spec)
blob.write_bytes(exported.serialize())
"""


@dataclass(frozen=True)
class BuiltWithoutACompiler:
    """What the ``WITHOUT_A_C_COMPILER`` process left."""

    env: dict[str, str]  # no C compiler, the cache below
    cache: Path
    stderr: str
    blob: Path  # the parallel kernel, exported


@pytest.fixture(scope="module")
def built_without_a_compiler(tmp_path_factory) -> BuiltWithoutACompiler:
    # Fresh processes, this one and the later one: their PATH (no cc) is not the
    # zygote's, and a zygote for it would replace the run's, started again after.
    tmp = tmp_path_factory.mktemp("no_cc")
    env = _without_a_c_compiler(dict(os.environ), tmp)  # os.environ: as run_env
    blob = tmp / "thrice.jaxexport"
    proc = subprocess.run(
        [sys.executable, "-c", WITHOUT_A_C_COMPILER, str(blob)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return BuiltWithoutACompiler(env, tmp / "pk", proc.stderr, blob)


#: One later process for both tests below (a fresh one costs about a CPU-second),
#: no C compiler either, on the cache above, under Numba's workqueue layer: the
#: parallel kernel's export (the file argv[1]) revived, its refusal printed, then
#: the cache child's A and N (not parallel: the layer is nothing to them).
LATER = f"""
import runpy, sys
from pathlib import Path
import polykernel as pk
try:
    pk.load_exported(Path(sys.argv[1]).read_bytes())
except pk.KernelRegistrationError as err:
    print(err)
sys.argv = [{str(CHILD)!r}, 'A', 'N']
runpy.run_path({str(CHILD)!r}, run_name='__main__')
"""


@pytest.fixture(scope="module")
def later_without_a_compiler(built_without_a_compiler) -> str:
    """What the ``LATER`` process printed."""
    built = built_without_a_compiler
    env = dict(built.env, NUMBA_THREADING_LAYER="workqueue")
    return run_python("-c", LATER, str(built.blob), env=env, timeout=300)


@pytest.mark.slow  # subprocesses, compiles
def test_without_a_c_compiler_the_handler_is_a_jit_object(
    built_without_a_compiler, later_without_a_compiler
):
    built = built_without_a_compiler
    assert "no C compiler to link a shared object" in built.stderr
    files = {p.name for p in (built.cache / "numba").rglob("handler.*")}
    assert files == {"handler.o"}
    # a later process (with a compiler or not) loads the object into Numba's JIT
    rows = _read_rows(later_without_a_compiler)
    assert {v: r["origin"] for v, r in rows.items()} == {"A": "disk", "N": "disk"}


@pytest.mark.slow  # subprocesses, compiles
def test_a_parallel_jit_object_is_refused_under_workqueue(later_without_a_compiler):
    said = later_without_a_compiler
    assert "cannot register FFI target 'pk_numba_" in said
    assert "the layer is 'workqueue'" in said
    assert "NUMBA_THREADING_LAYER=omp" in said


def _other_pythons() -> list[Path]:
    """Interpreters of the other test virtualenvs (other Python versions)."""
    here = Path(sys.prefix).resolve()
    found = []
    for venv in sorted(REPO.glob(".venv*")):
        python = venv / "bin" / "python"
        if venv.resolve() != here and python.exists() and venv.name != ".venv-docs":
            found.append(python)
    return found


OPEN = """
import json, sys
from polykernel.ffi.artefact import load_library, symbol_address
from polykernel.native.runtime import load_runtime
load_runtime()
library = load_library(sys.argv[1])
print(json.dumps([sys.version_info[:2], symbol_address(library, sys.argv[2]) != 0]))
"""


@pytest.mark.parametrize("python", _other_pythons(), ids=lambda p: p.parent.parent.name)
def test_an_artefact_built_here_opens_in_another_python(python, run_env):
    handler = _handler(refuses)  # its error path calls the C API and the runtime
    found = cache.find(handler.target)
    env = dict(run_env, PYTHONPATH=str(REPO / "src"))
    out = subprocess.run(
        [str(python), "-c", OPEN, str(found.path), handler.target],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    version, opened = json.loads(out.stdout.splitlines()[-1])
    assert opened, version
