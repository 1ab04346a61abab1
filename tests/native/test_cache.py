"""The native cache: keys, integrity, locking across processes, info/clear/prune."""

from __future__ import annotations

import json
import logging
import os
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import zygote
from subprocess_support import run_python

from polykernel import load_cpp_inline
from polykernel.errors import CacheWarning
from polykernel.native import cache

SRC = """void inc(const pk::Tensor& x, pk::Tensor& y) {
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data_ptr<float>()[i] = x.data_ptr<float>()[i] + 1;
}"""

# Loads SRC with a logging compiler, prints {"built": ..., "value": ...}.
CHILD = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp
    from polykernel import CompileOptions, load_cpp_inline
    name, cxx, src = sys.argv[1], sys.argv[2], sys.stdin.read()
    mod = load_cpp_inline(name, src, ["inc"], options=CompileOptions(compiler=cxx))
    x = jnp.arange(3, dtype=jnp.float32)
    y = mod.inc(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype))
    print(json.dumps({"built": mod.built, "value": y.tolist(), "lib": mod.library}))
    """
)


def _logging_cxx(folder: Path) -> tuple[Path, Path]:
    """A g++ wrapper that appends every command line to a log file."""
    log = folder / "cxx.log"
    script = folder / "logged-g++"
    script.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec g++ "$@"\n')
    script.chmod(0o755)
    return script, log


def _compiles(log: str) -> int:
    return sum("-shared" in line for line in log.splitlines())


def _child(env, name, cxx):
    # A process of its own, started at once with the others (forked by the
    # zygote, before any build: a fresh one's caches, none of its imports).
    return zygote.start(["-c", CHILD, name, str(cxx)], env=env, input=SRC)


def _result(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_key_is_named_parts_and_logged(caplog):
    parts = {"source": "a", "flags": "-O3"}
    with caplog.at_level(logging.DEBUG, logger="polykernel.native.cache"):
        key = cache.compute_key(parts)
    assert key == cache.compute_key(dict(reversed(parts.items())))
    assert key != cache.compute_key({**parts, "flags": "-O2"})
    assert "part source" in caplog.text and "part flags" in caplog.text


@dataclass(frozen=True)
class Race:
    """Eight processes started at once, each loading SRC as ``cache_race`` with
    ``cxx`` (logging to ``log``), on one cache (``env``'s)."""

    env: dict[str, str]
    cxx: Path
    log: Path
    results: list[dict]  # each process's line
    logged: str  # the log when all had finished


@pytest.fixture(scope="module")
def race(tmp_path_factory) -> Race:
    cxx, log = _logging_cxx(tmp_path_factory.mktemp("race"))
    env = dict(os.environ)  # what run_env gives
    procs = [_child(env, "cache_race", cxx) for _ in range(8)]
    results = [_result(p) for p in procs]
    return Race(env, cxx, log, results, log.read_text())


@pytest.mark.slow
def test_eight_processes_build_once(race):
    assert all(r["value"] == [1.0, 2.0, 3.0] for r in race.results)
    assert sum(r["built"] for r in race.results) == 1
    assert _compiles(race.logged) == 1


@pytest.mark.slow
def test_hit_in_new_process_runs_no_compiler_and_corrupt_entry_rebuilds(race):
    # The first process is the race's (a fresh process costs about a CPU-second):
    # one of its eight built, with one compile, and asked the compiler's version.
    lines_after_build = race.logged
    assert _compiles(lines_after_build) == 1 and "--version" in lines_after_build
    second = _result(_child(race.env, "cache_race", race.cxx))
    assert not second["built"] and second["value"] == [1.0, 2.0, 3.0]
    assert race.log.read_text() == lines_after_build  # neither a compile nor --version
    lib = Path(second["lib"])
    lib.write_bytes(lib.read_bytes()[: lib.stat().st_size // 2])  # truncate
    third = _result(_child(race.env, "cache_race", race.cxx))
    assert third["built"] and third["value"] == [1.0, 2.0, 3.0]
    assert _compiles(race.log.read_text()) == 2


def _runs(mod) -> None:
    x = jnp.arange(3, dtype=jnp.float32)
    out = mod.inc(x, outs=jax.ShapeDtypeStruct((3,), jnp.float32))
    np.testing.assert_array_equal(out, x + 1)


def test_an_unusable_cache_root_is_a_miss_with_one_warning(tmp_path, monkeypatch):
    monkeypatch.setattr("polykernel.cache.store._warned", set())
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(blocker / "cache"))
    with pytest.warns(CacheWarning, match="a path of the cache is a file") as seen:
        mod = load_cpp_inline("unwritable_mod", SRC, ["inc"])
    assert len(seen) == 1 and mod.built
    assert not Path(mod.library).is_relative_to(blocker)  # a private build
    _runs(mod)


def test_a_group_writable_root_is_never_loaded_from(tmp_path, monkeypatch):
    monkeypatch.setattr("polykernel.cache.store._warned", set())
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o770)
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(root))
    with pytest.warns(CacheWarning, match="the cache is writable by others"):
        mod = load_cpp_inline("shared_mod", SRC, ["inc"])
    assert not Path(mod.library).is_relative_to(root)
    _runs(mod)


def test_import_creates_nothing(tmp_path, run_env):
    env = {
        **run_env,
        "POLYKERNEL_CACHE_DIR": str(tmp_path / "never"),
        "HOME": str(tmp_path / "home"),
    }
    code = (
        "import polykernel, polykernel.native, polykernel.native.cache as c, sys;"
        "assert 'numba' not in sys.modules; print(c.info()['exists'])"
    )
    assert run_python(code=code, env=env).strip() == "False"
    assert not (tmp_path / "never").exists() and not (tmp_path / "home").exists()


def _fake_tree(root: Path) -> None:
    old = time.time() - 3600
    for i, key in enumerate(["a" * 40, "b" * 40]):
        entry = root / "native" / key
        entry.mkdir(parents=True)
        (entry / "lib.so").write_bytes(b"x" * 1000)
        (entry / "meta.json").write_text("{}")
        for f in entry.iterdir():
            os.utime(f, (old + i, old + i))
    numba = root / "numba" / "mod_dir"
    numba.mkdir(parents=True)
    (numba / "f.nbi").write_bytes(b"y" * 500)


def test_info_prune_clear_cover_the_whole_root(tmp_path, monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(root))
    assert cache.info()["exists"] is False and cache.prune(0) == 0
    assert cache.clear() == 0 and not root.exists()
    _fake_tree(root)
    info = cache.info()
    assert info["bytes"] == 2 * 1002 + 500 and info["native_entries"] == 2
    assert info["subdirs"]["numba"] == {"bytes": 500, "files": 1}
    assert cache.prune(1600) == 1002  # the least recently used native entry
    assert not (root / "native" / ("a" * 40)).exists()
    assert (root / "numba" / "mod_dir" / "f.nbi").exists()
    assert cache.clear() == 1502
    assert root.is_dir() and not any(root.iterdir())
    with pytest.raises(ValueError, match="max_bytes must be a non-negative int"):
        cache.prune(-1)


def test_toolchain_and_arch_errors(monkeypatch, no_gpu):
    from polykernel.errors import ToolchainError
    from polykernel.native import toolchain

    with pytest.raises(ToolchainError, match=r"no C\+\+ compiler found .* set CXX"):
        toolchain.find_host_compiler("/nonexistent/g++")
    with pytest.raises(ToolchainError, match="nvcc not found"):
        toolchain.find_nvcc("/nonexistent/nvcc")
    with pytest.raises(ToolchainError, match="architecture 'sm_x' is not understood"):
        toolchain.cuda_arches(("sm_x",))
    assert toolchain.cuda_arches(("sm_80", "9.0", 86)) == ("80", "90", "86")
    monkeypatch.setenv("POLYKERNEL_CUDA_ARCH", "80, 90a")
    assert toolchain.cuda_arches(None) == ("80", "90a")
    monkeypatch.delenv("POLYKERNEL_CUDA_ARCH")
    monkeypatch.setenv("PATH", "/nonexistent")  # hides nvidia-smi
    toolchain._detect_gpu_arches.cache_clear()
    with pytest.raises(
        ToolchainError,
        match=r"no CUDA GPU is visible .*"
        r"CompileOptions\(cuda_arch=\['sm_80'\]\) .* "
        r"POLYKERNEL_CUDA_ARCH=80",
    ):
        toolchain.cuda_arches(None)
    toolchain._detect_gpu_arches.cache_clear()
