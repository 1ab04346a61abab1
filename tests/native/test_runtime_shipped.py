"""The runtime library compiled at install, and an empty cache adopting it.

``pip install`` runs ``hatch_build.py``, which compiles polykernel's runtime
library into the package with a ``recipe.json``; a cache without the library takes
that copy instead of compiling it on a machine's first Numba kernel (issue 36: an
empty cache's first compile at the floor). Adopted only when built from this very
recipe and intact; anything else is built as before.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from subprocess_support import REPO, last_json, run_python

from polykernel.ffi.artefact import machine
from polykernel.native import runtime, runtime_recipe


def _hook():
    spec = importlib.util.spec_from_file_location("pk_hatch_build",
                                                  REPO / "hatch_build.py")  # fmt: skip
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _checkout_copy(root: Path) -> Path:
    """The recipe and the C sources alone, laid out as in the checkout."""
    native = root / "src" / "polykernel" / "native"
    shutil.copytree(runtime_recipe.SOURCE_DIR, native / "runtime",
                    ignore=shutil.ignore_patterns("shipped"))  # fmt: skip
    shutil.copy(Path(runtime_recipe.__file__), native / "runtime_recipe.py")
    return native / "runtime" / "shipped"


def _ship(folder: Path, library: bytes, **changes: str) -> None:
    runtime_recipe.write_shipped(library, machine(), folder)
    if changes:
        recipe = json.loads((folder / "recipe.json").read_text())
        (folder / "recipe.json").write_text(json.dumps({**recipe, **changes}))


def test_the_install_compiled_it_into_the_package_from_this_recipe():
    library = runtime_recipe.shipped_library(machine())
    assert library is not None, (
        f"no runtime library of this recipe in {runtime_recipe.SHIPPED}: "
        "reinstall polykernel (pip install -e .) with a C compiler"
    )
    opened = ctypes.CDLL(str(runtime_recipe.SHIPPED / "lib.so"))
    assert opened.pkrt_abi_version() == runtime.ABI_VERSION


def test_the_build_hook_compiles_the_recipe_and_says_why_when_it_cannot(
    tmp_path, monkeypatch
):
    hook = _hook()
    shipped = _checkout_copy(tmp_path)
    assert hook.build_runtime(tmp_path) is None
    library = runtime_recipe.shipped_library(machine(), shipped)
    assert library is not None
    assert ctypes.CDLL(str(shipped / "lib.so")).pkrt_abi_version() == 1
    # The hook names the machine as polykernel does.
    assert json.loads((shipped / "recipe.json").read_text())["machine"] == machine()

    shutil.rmtree(shipped)
    monkeypatch.setenv("CC", "false")  # a compiler that fails
    why = hook.build_runtime(tmp_path)
    assert why is not None and "failed" in why and not shipped.exists()
    monkeypatch.setenv("CC", "")
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    assert hook.build_runtime(tmp_path) == "no C compiler ($CC, cc, gcc, clang)"
    assert not shipped.exists()


# hatch_build.py as a script, in a Python where hatchling cannot be imported.
NO_HATCHLING = """
import runpy, sys
sys.modules["hatchling"] = None  # import hatchling.<anything> now fails
runpy.run_path(sys.argv[1], run_name="__main__")
"""


def _run_as_script(script: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-c", NO_HATCHLING, str(script)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def test_run_as_a_script_without_hatchling_it_builds_into_its_checkout(tmp_path):
    # What `make test-gpu` does in a source tree that was never installed.
    shipped = _checkout_copy(tmp_path)
    shutil.copy(REPO / "hatch_build.py", tmp_path / "hatch_build.py")
    done = _run_as_script(tmp_path / "hatch_build.py")
    assert done.returncode == 0, done.stderr
    built_into = tmp_path / "src" / "polykernel" / "native" / "runtime"
    assert done.stdout.strip() == f"polykernel: runtime library built into {built_into}"
    assert runtime_recipe.shipped_library(machine(), shipped) is not None
    assert ctypes.CDLL(str(shipped / "lib.so")).pkrt_abi_version() == 1

    shutil.rmtree(shipped)  # no compiler: said, and not an error, as at install
    env = {**os.environ, "CC": "", "PATH": str(tmp_path / "nothing")}
    done = _run_as_script(tmp_path / "hatch_build.py", env)
    assert done.returncode == 0 and done.stdout == "" and not shipped.exists()
    assert done.stderr.strip() == (
        "polykernel: runtime library not built at install (no C compiler ($CC, cc, "
        "gcc, clang)); it is built at first use."
    )


@pytest.mark.parametrize(
    "damage",
    ["other machine", "other flags", "other abi", "other source", "bytes changed",
     "no recipe", "recipe not a dict", "no library"],
)  # fmt: skip
def test_a_copy_of_another_recipe_or_damaged_is_not_adopted(tmp_path, damage):
    library = b"\x7fELF not really a library"
    changes = {"other machine": {"machine": "riscv64-linux"},
               "other flags": {"flags": "-O3"}, "other abi": {"abi": "0"},
               "other source": {"source_sha256": "0" * 64}}  # fmt: skip
    _ship(tmp_path, library, **changes.get(damage, {}))
    assert runtime_recipe.shipped_library(machine(), tmp_path) == (
        None if damage in changes else library
    )
    if damage == "bytes changed":
        (tmp_path / "lib.so").write_bytes(library + b"!")
    elif damage == "no recipe":
        (tmp_path / "recipe.json").unlink()
    elif damage == "recipe not a dict":
        (tmp_path / "recipe.json").write_text("[1, 2]")
    elif damage == "no library":
        (tmp_path / "lib.so").unlink()
    assert runtime_recipe.shipped_library(machine(), tmp_path) is None


# In a fresh process (one runtime library per process): point the adoption at
# SHIPPED (argv[1]; "-" keeps the package's), record every process started, get
# the library and report its cache entry.
CHILD = """
import json, subprocess, sys
from pathlib import Path
from polykernel.native import runtime, runtime_recipe
if sys.argv[1] != "-":
    runtime_recipe.SHIPPED = Path(sys.argv[1])
started = []
real = subprocess.Popen.__init__
def record(self, args, *a, **k):
    started.append(str(args[0] if isinstance(args, (list, tuple)) else args))
    real(self, args, *a, **k)
subprocess.Popen.__init__ = record
library = runtime.load_runtime()
path = runtime.runtime_library()
meta = json.loads((path.parent / "meta.json").read_text())
print(json.dumps({"path": str(path), "abi": library.pkrt_abi_version(),
                  "shipped": meta.get("shipped"), "built": "command" in meta,
                  "started": started}))
"""


def _child(shipped: str, cache: Path) -> dict:
    env = {**os.environ, "POLYKERNEL_CACHE_DIR": str(cache)}
    return last_json(run_python("-c", CHILD, shipped, env=env, forked=True))


def test_an_empty_cache_adopts_the_installed_copy_and_runs_no_compiler(tmp_path):
    got = _child("-", tmp_path / "cache")
    assert got["abi"] == runtime.ABI_VERSION
    assert got["shipped"] == str(runtime_recipe.SHIPPED) and not got["built"]
    assert got["started"] == []
    entry = Path(got["path"]).parent
    assert entry.parent == tmp_path / "cache" / "native"  # published, as if built
    assert (entry / "lib.so").read_bytes() == runtime_recipe.shipped_library(machine())
    # The next process finds it in the cache as any library.
    again = _child("-", tmp_path / "cache")
    assert again["path"] == got["path"] and again["started"] == []


def test_a_copy_that_does_not_load_or_of_another_recipe_is_built_instead(tmp_path):
    # Recipe and checksum agree, but the bytes are no library: the adopted entry is
    # removed again and the library is built.
    unloadable = tmp_path / "unloadable"
    _ship(unloadable, b"\x7fELF truncated")
    got = _child(str(unloadable), tmp_path / "cache1")
    assert got["built"] and got["shipped"] is None and got["abi"] == 1
    assert any(Path(p).name in ("cc", "gcc", "clang") for p in got["started"]), got
    assert hashlib.sha256(Path(got["path"]).read_bytes()).hexdigest() != (
        hashlib.sha256(b"\x7fELF truncated").hexdigest()
    )
    other = tmp_path / "other"
    _ship(other, Path(runtime_recipe.SHIPPED / "lib.so").read_bytes(), abi="0")
    got = _child(str(other), tmp_path / "cache2")
    assert got["built"] and got["shipped"] is None and got["abi"] == 1
