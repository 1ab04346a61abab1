"""A Warp CPU kernel built once into a shared object that loads without Warp or
llvmlite: its handler linked with Warp's object, kept in the cache, loaded by name.

Each process here is a child of the test process's ``jax`` zygote
(``linked_child.py``, ``zygote.py``): a new process with NumPy, JAX and polykernel
imported and nothing else, as a fresh one is once it imported them. It imports Warp
and llvmlite itself (or is kept from them), starts Warp's runtime and loads the
handler's shared object itself, and its ``Popen`` hook counts its own processes, so
what it reports is what a fresh process would. The first of a scenario builds
(Warp compiles, the handler is linked): it runs once for the module
(``first_process``) and each test goes on in a copy of its caches, so the later
processes, which only load, and the damage a test does are that test's alone.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from subprocess_support import last_json, run_python

wp = pytest.importorskip("warp")
pytest.importorskip("llvmlite")

CHILD = Path(__file__).with_name("linked_child.py")
X = list(range(16))


@wp.kernel
def _scaled(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
            alpha: wp.float32, out: wp.array(dtype=wp.float32)):  # fmt: skip
    i = wp.tid()
    out[i] = alpha * x[i] - y[i]


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "POLYKERNEL_CACHE_DIR": str(tmp_path / "pk"),
        "WARP_CACHE_PATH": str(tmp_path / "warp"),
    }


def _child(env: dict[str, str], *args: object) -> dict:
    return last_json(
        run_python(CHILD, *map(str, args), env=env, timeout=300, forked=True)
    )


def _linked_entries(root: Path) -> list[Path]:
    return sorted((root / "pk" / "warp").glob("pk_warp_*-*"))


@dataclass(frozen=True)
class FirstProcess:
    root: Path  # its caches (pk/, warp/) and, after an export, warp.jaxexport
    report: dict

    def copied_to(self, tmp_path: Path) -> dict[str, str]:
        """Its caches and export, copied into ``tmp_path``: the environment of a
        test's later processes, which may damage or add entries there."""
        shutil.copytree(self.root, tmp_path, dirs_exist_ok=True)
        return _env(tmp_path)


@pytest.fixture(scope="module")
def first_process(tmp_path_factory):
    """The cold first process of a mode, run once for the module (a cold one costs
    ~3 CPU-s: Warp compiles and the handler is linked), in caches of its own.

    Tests that start with a ``user`` process take an ``export`` one: it is a
    ``user`` process that exports afterwards, its report is taken before, and the
    caches it leaves are the same files (the export calls the same target), so one
    such process serves them all (likewise ``export-nolinker`` for
    ``user-nolinker``).

    ``export-nolinker`` starts with Warp's own cache as ``export`` left it: the
    same kernel, which Warp builds alike with or without a C compiler (it
    compiles with its own Clang), so it need not compile it again (~1.7 CPU-s);
    polykernel's cache is as cold as in every first process."""
    runs: dict[str, FirstProcess] = {}

    def run(mode: str) -> FirstProcess:
        if mode not in runs:
            root = tmp_path_factory.mktemp(mode)
            if mode == "export-nolinker":
                shutil.copytree(run("export").root / "warp", root / "warp")
            runs[mode] = FirstProcess(root, _child(_env(root), mode, root))
        return runs[mode]

    return run


@pytest.mark.slow
@pytest.mark.parametrize(
    ("first_mode", "mode"),
    [("export", "user"), ("catalog", "catalog")],
    ids=["user", "catalog"],
)
def test_a_warm_process_loads_the_shared_object_and_builds_nothing(
    tmp_path, first_process, first_mode, mode
):
    first = first_process(first_mode)
    cold = first.report
    assert cold["out"] == [2.0 * x + 1 for x in X]
    assert cold["artefact"] is not None and cold["warp_built"]
    (built,) = _linked_entries(first.root)
    assert cold["artefact"]["library"] == str(built / "handler.so")

    env = first.copied_to(tmp_path)
    (entry,) = _linked_entries(tmp_path)
    warm = _child(env, mode)
    assert warm["out"] == cold["out"] and warm["targets"] == cold["targets"]
    assert warm["artefact"]["library"] == str(entry / "handler.so")
    assert warm["artefact"]["sha256"] == cold["artefact"]["sha256"]
    # No Warp build or runtime, no llvmlite (so no MCJIT), no process started.
    assert not warm["warp_built"] and not warm["warp_runtime"]
    assert not warm["llvmlite"]
    assert warm["spawned"] == []


@pytest.mark.slow
def test_only_the_handler_is_exported(first_process):
    (entry,) = _linked_entries(first_process("export").root)  # only read here
    meta = json.loads((entry / "meta.json").read_text())
    library = ctypes.CDLL(str(entry / "handler.so"), mode=ctypes.RTLD_LOCAL)
    assert getattr(library, meta["symbol"])  # the handler, named like its target
    with pytest.raises(AttributeError):  # Warp's symbols stay inside
        getattr(library, meta["entry"])


@pytest.mark.slow
def test_an_exported_program_runs_where_warp_and_llvmlite_cannot_be_imported(
    tmp_path, first_process
):
    first = first_process("export")
    exported = first.report
    env = first.copied_to(tmp_path)
    loaded = _child(env, "run", tmp_path)
    assert loaded["out"] == [4.0 * x for x in X]
    assert not loaded["warp_imported"] and not loaded["llvmlite"]
    assert loaded["artefact"] is not None and loaded["spawned"] == []
    assert set(loaded["targets"]) <= set(exported["targets"])


@pytest.mark.slow
def test_a_target_built_without_a_compiler_is_linked_again_by_its_reviver(
    tmp_path, first_process
):
    # As when the program was exported under another jaxlib: the cache holds
    # Warp's object but no shared object for this one. The reviver links one from
    # that object with llvmlite and the C compiler; Warp is not needed.
    env = first_process("export-nolinker").copied_to(tmp_path)
    assert _linked_entries(tmp_path) == []
    loaded = _child(env, "run-llvmlite", tmp_path)
    assert loaded["out"] == [4.0 * x for x in X]
    assert not loaded["warp_imported"] and loaded["artefact"] is not None
    (entry,) = _linked_entries(tmp_path)
    assert loaded["artefact"]["library"] == str(entry / "handler.so")


@pytest.mark.slow
def test_without_a_compiler_the_handler_is_jit_compiled_then_linked_later(
    tmp_path, first_process
):
    first = first_process("export-nolinker")  # user-nolinker, then an export
    jit = first.report
    env = first.copied_to(tmp_path)
    assert jit["out"] == [2.0 * x + 1 for x in X]
    assert jit["artefact"] is None and jit["llvmlite"] and jit["portable"]
    assert _linked_entries(tmp_path) == []
    # A process that can link builds the shared object from Warp's own cache.
    linked = _child(env, "user")
    assert linked["targets"] == jit["targets"] and linked["artefact"] is not None


def _damage_library(entry: Path) -> None:
    (entry / "handler.so").write_bytes(b"not a library")


def _foreign_ffi(entry: Path) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    meta["requires"]["ffi"] = "0" * 32
    (entry / "meta.json").write_text(json.dumps(meta))


def _junk_but_listed(entry: Path) -> None:
    import hashlib

    junk = b"\x7fELF junk that no loader takes"
    (entry / "handler.so").write_bytes(junk)
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"]["handler.so"] = {
        "size": len(junk),
        "sha256": hashlib.sha256(junk).hexdigest(),
    }
    (entry / "meta.json").write_text(json.dumps(meta))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("spoil", "cached"),
    [(_damage_library, True), (_foreign_ffi, None), (_junk_but_listed, False)],
    ids=["checksum", "requirements", "unloadable"],
)
def test_a_damaged_or_unfit_entry_is_a_miss_and_the_kernel_is_rebuilt(
    tmp_path, first_process, spoil, cached
):
    first = first_process("export")
    env = first.copied_to(tmp_path)
    (entry,) = _linked_entries(tmp_path)
    spoil(entry)
    again = _child(env, "user")
    built = first.report
    assert again["out"] == built["out"] and again["targets"] == built["targets"]
    assert again["artefact"]["sha256"] == built["artefact"]["sha256"]
    in_cache = again["artefact"]["library"] == str(entry / "handler.so")
    # A damaged entry is replaced. An entry that is valid but unfit here is kept
    # (its key names the same content) and this process loads its own build: a
    # private copy, or the entry's file when the bytes are the same.
    assert cached is None or in_cache is cached


#: The CPython C API a handler's error path may call: all of the stable ABI, so a
#: library built under one CPython loads under another (resolved by name there).
STABLE_ABI = {
    "PyGILState_Ensure", "PyGILState_Release", "PyImport_ImportModule",
    "PyObject_GetAttrString", "PyLong_AsVoidPtr", "Py_DecRef", "PyErr_Clear",
    "PyErr_Fetch", "PyErr_NormalizeException", "PyObject_CallFunction",
}  # fmt: skip


def _signature(half_dtype: str = "float32"):
    from polykernel.ffi.handler_ir.signature import Signature

    return Signature((("float32", 1), (half_dtype, 1)), (("float32", 1),),
                     (("alpha", "float32"),), half="bits")  # fmt: skip


def test_the_handler_calls_warp_and_the_stable_c_api_by_name_only():
    from polykernel.backends.warp.cpu_handler import handler_module, llvm
    from polykernel.backends.warp.plan import describe_kernel

    tm = llvm().Target.from_default_triple().create_target_machine(reloc="pic")
    plan = describe_kernel(_scaled)
    module = handler_module(tm, "pk_warp_test", _signature(), "scaled", plan,
                            "scaled_0_cpu_forward", 0)  # fmt: skip
    declared = {f.name for f in module.functions if f.is_declaration}
    calls = {n for n in declared if not n.startswith("llvm.")}
    assert "scaled_0_cpu_forward" in calls
    assert calls - {"scaled_0_cpu_forward"} <= STABLE_ABI


@pytest.mark.slow
def test_a_linked_handler_words_a_frame_mismatch_through_python():
    import jax
    import jax.numpy as jnp

    import polykernel as pk
    from polykernel.ffi import targets

    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    f = pk.warp_kernel(_scaled, spec)
    x = jnp.arange(4, dtype=jnp.float32)
    assert f(x, x, alpha=3.0).tolist() == [0.0, 2.0, 4.0, 6.0]
    target = jax.jit(lambda a: f(a, a, alpha=3.0)).lower(x).as_text()
    (name,) = {t for t in pk.list_registered_targets() if t in target}
    assert targets.lookup(name, "cpu").artefact is not None  # the linked library
    call = jax.ffi.ffi_call(name, spec)
    with pytest.raises(Exception, match=r"'_scaled': input 1 must be float32\[1\]"):
        jax.block_until_ready(call(x, jnp.ones(4, jnp.int32), alpha=np.float32(1)))
