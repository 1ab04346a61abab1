"""polykernel's runtime library: Numba's helpers and threading layer, our code.

Each C function is checked against Numba's own where Numba exports it (the
scheduler, the reshape helper), the pool's work assignment against OpenMP's static
schedule, and the CPython C API a handler may call against the headers of every
Python the project supports.
"""

from __future__ import annotations

import ctypes
import pickle
import random
import re
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path

import numpy as np
import pytest
from subprocess_support import REPO, last_json, run_python

from polykernel.native import runtime, runtime_recipe

numba = pytest.importorskip("numba")

P = ctypes.POINTER(ctypes.c_ssize_t)


@pytest.fixture(scope="module")
def lib() -> ctypes.CDLL:
    return runtime.load_runtime()


def _fn(library, name, restype, *argtypes):
    fn = getattr(library, name)
    fn.restype, fn.argtypes = restype, list(argtypes)
    return fn


def test_the_library_provides_every_renamed_function(lib):
    assert runtime.runtime_library().is_file()
    missing = [n for n in runtime.RENAMES.values() if not hasattr(lib, n)]
    assert missing == []
    assert lib.pkrt_abi_version() == runtime.ABI_VERSION


def test_it_is_built_once_per_machine_into_the_native_cache(lib):
    path = runtime.runtime_library()
    assert path.parent.parent.name == "native"  # the one native build path
    assert (path.parent / "source.c").read_text() == runtime._source()


PREFETCH_CHILD = """
import json, sys, threading, time
from pathlib import Path
from polykernel.native import runtime, runtime_recipe
from polykernel.errors import HostCompilerNotFoundError
runtime_recipe.SHIPPED = Path(SHIPPED)  # the copy pip install compiled, or none
started = time.perf_counter()
runtime.prefetch_runtime()  # returns at once: the build runs in its own thread
returned = time.perf_counter() - started
# The thread it started, by name (it may have finished already: with no compiler
# the build fails within milliseconds, so a list of live threads can miss it).
thread = runtime._prefetching
try:
    library = runtime.load_runtime()  # waits for the thread, then opens the library
    outcome = library.pkrt_abi_version() == runtime.ABI_VERSION
except HostCompilerNotFoundError as err:
    outcome = type(err).__name__
runtime.prefetch_runtime()  # opened: nothing more to start
print(json.dumps({"returned_s": returned, "thread": thread and thread.name,
                  "outcome": outcome,
                  "after": [t.name for t in threading.enumerate()]}))
"""


@pytest.mark.slow  # a new process building the library into an empty cache
@pytest.mark.parametrize(
    ("compiler", "shipped"),
    [(True, False), (False, False), (False, True)],
    ids=["cc", "no-compiler", "no-compiler-installed-copy"],
)
def test_a_prefetch_builds_in_the_background_and_load_waits_for_it(
    tmp_path, run_env, compiler, shipped
):
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "cache"))
    if not compiler:
        (tmp_path / "empty").mkdir()
        env["PATH"] = str(tmp_path / "empty")
        for named in ("CC", "CXX"):  # a compiler named by path (GPU machines do)
            env.pop(named, None)
    # Without the copy compiled at install (tests/native/test_runtime_shipped.py),
    # an empty cache builds the library.
    folder = runtime_recipe.SHIPPED if shipped else tmp_path / "not-installed"
    code = PREFETCH_CHILD.replace("SHIPPED)", f"{str(folder)!r})", 1)
    # With a compiler, a child of the jax zygote (which has not loaded the runtime
    # nor started a thread); without, a fresh process: its PATH is not the zygote's.
    got = last_json(run_python(code=code, env=env, timeout=300, forked=compiler))
    assert got["returned_s"] < 0.5, got  # a C compile takes longer than that
    assert got["thread"] == "polykernel-runtime-prefetch", got
    assert "polykernel-runtime-prefetch" not in got["after"], got
    # Built (or adopted) and opened; or, with neither a compiler nor the installed
    # copy, the loader's own named error.
    expected = True if compiler or shipped else "HostCompilerNotFoundError"
    assert got["outcome"] == expected, got


# -- the CPython C API: one ABI for every supported Python ---------------------------
def _includes() -> dict[str, Path]:
    """Python's include folder of this and each other test virtualenv."""
    found = {sysconfig.get_python_version(): Path(sysconfig.get_paths()["include"])}
    for venv in REPO.glob(".venv*"):
        python = venv / "bin" / "python"
        if not python.exists():
            continue
        out = subprocess.run(
            [
                str(python),
                "-c",
                "import sys, sysconfig; print(sysconfig."
                "get_python_version(), sysconfig.get_paths()['include'])",
            ],
            capture_output=True,
            text=True,
        ).stdout.split()
        if len(out) == 2:
            found.setdefault(out[0], Path(out[1]))
    return {v: p for v, p in found.items() if (p / "Python.h").exists()}


def _declarations(include: Path) -> dict[str, str]:
    """Every ``Py*`` function and data declaration of ``Python.h``, normalised."""
    text = subprocess.run(
        ["cc", "-E", "-P", "-I", str(include), "-x", "c", "-"],
        input='#include "Python.h"\n',
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = {}
    for stmt in re.sub(r"\s+", " ", text).split(";"):
        stmt = stmt.rsplit("}", 1)[-1]  # after the body of an inline function
        stmt = re.sub(
            r"__attribute__ ?\(\((?:[^()]|\([^()]*\))*\)\)\s*", "", stmt
        ).strip()
        if "{" in stmt or "typedef" in stmt:
            continue
        call = re.search(r"\b(_?Py\w+) ?\((.*)\)$", stmt)
        data = re.match(r"^extern (.*?)\b(_?Py\w+)$", stmt)
        if call:
            found.setdefault(call.group(1), stmt)
        elif data:
            found.setdefault(data.group(2), stmt)
    return found


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C preprocessor")
def test_the_c_api_handlers_may_call_is_declared_alike_in_every_python():
    includes = _includes()
    if len(includes) < 2:
        pytest.skip(f"headers of one Python only: {sorted(includes)}")
    seen = {version: _declarations(path) for version, path in includes.items()}
    differ = {}
    for name in sorted(runtime.CAPI):
        decls = {version: found.get(name) for version, found in seen.items()}
        if None in decls.values() or len(set(decls.values())) != 1:
            differ[name] = decls
    assert differ == {}, differ


def test_this_python_exports_the_whole_c_api_allowed():
    assert [n for n in runtime.CAPI if not hasattr(ctypes.pythonapi, n)] == []


# -- the scheduler: Numba's, to the bit -----------------------------------------------
def _numba_layer() -> ctypes.CDLL:
    from numba.np.ufunc import omppool

    return ctypes.CDLL(omppool.__file__)


def _schedule(library, prefix, starts, ends, pieces, signed=True):
    kind = "signed" if signed else "unsigned"
    fn = _fn(
        library,
        f"{prefix}do_scheduling_{kind}",
        None,
        ctypes.c_size_t,
        P,
        P,
        ctypes.c_size_t,
        P,
        ctypes.c_ssize_t,
    )
    s, e = np.array(starts, np.intp), np.array(ends, np.intp)
    out = np.full(pieces * len(starts) * 2, -7, np.intp)
    fn(
        len(starts),
        s.ctypes.data_as(P),
        e.ctypes.data_as(P),
        pieces,
        out.ctypes.data_as(P),
        0,
    )
    return out


def test_the_schedule_of_every_loop_nest_is_numbas(lib):
    ours, theirs = lib, _numba_layer()
    rng = random.Random(36)
    for _ in range(3000):
        ndim = rng.choice([1, 1, 2, 2, 3, 4, 6, 9])
        starts = [rng.randint(-4, 4) for _ in range(ndim)]
        ends = [s + rng.choice([-1, 0, 1, 2, 5, 17, 64, 999]) for s in starts]
        pieces = rng.choice([1, 2, 3, 4, 7, 8, 16, 33])
        signed = rng.random() < 0.5
        got = _schedule(ours, "pkrt_", starts, ends, pieces, signed)
        want = _schedule(theirs, "", starts, ends, pieces, signed)
        assert got.tolist() == want.tolist(), (starts, ends, pieces)


def test_the_number_of_pieces_follows_the_chunk_size_as_numbas(lib):
    ours, theirs = lib, _numba_layer()
    rng = random.Random(7)
    for _ in range(500):
        ndim = rng.randint(1, 3)
        s = np.array([rng.randint(0, 3) for _ in range(ndim)], np.intp)
        e = s + np.array([rng.randint(-1, 50) for _ in range(ndim)], np.intp)
        chunk, threads = rng.choice([0, 1, 3, 10, 1000]), rng.randint(1, 9)
        sizes = []
        for library, prefix in ((ours, "pkrt_"), (theirs, "")):
            setter = _fn(
                library,
                f"{prefix}set_parallel_chunksize",
                ctypes.c_size_t,
                ctypes.c_size_t,
            )
            size = _fn(
                library,
                f"{prefix}get_sched_size",
                ctypes.c_size_t,
                ctypes.c_size_t,
                ctypes.c_size_t,
                P,
                P,
            )
            old = setter(chunk)
            sizes.append(size(threads, ndim, s.ctypes.data_as(P), e.ctypes.data_as(P)))
            assert setter(old) == chunk
        assert sizes[0] == sizes[1]


def test_reshape_without_copy_is_numbas(lib):
    from numba import _helperlib

    theirs = ctypes.CFUNCTYPE(
        ctypes.c_int,
        ctypes.c_ssize_t,
        P,
        P,
        ctypes.c_ssize_t,
        P,
        P,
        ctypes.c_ssize_t,
        ctypes.c_int,
    )(_helperlib.c_helpers["attempt_nocopy_reshape"])
    ours = _fn(
        lib,
        "pkrt_attempt_nocopy_reshape",
        ctypes.c_int,
        ctypes.c_ssize_t,
        P,
        P,
        ctypes.c_ssize_t,
        P,
        P,
        ctypes.c_ssize_t,
        ctypes.c_int,
    )
    rng = np.random.default_rng(3)
    for _ in range(2000):
        dims = rng.integers(0, 4, rng.integers(0, 5)).astype(np.intp)
        strides = rng.choice([4, 8, 16, 24, -8], dims.size).astype(np.intp)
        size = int(np.prod(dims))
        new = np.array(rng.permutation([size] + [1] * rng.integers(0, 3)), np.intp)
        order = int(rng.integers(0, 2))
        results = []
        for fn in (ours, theirs):
            out = np.zeros(max(new.size, 1), np.intp)
            ok = fn(
                dims.size,
                dims.ctypes.data_as(P),
                strides.ctypes.data_as(P),
                new.size,
                new.ctypes.data_as(P),
                out.ctypes.data_as(P),
                4,
                order,
            )
            results.append((ok, out.tolist() if ok else None))
        assert results[0] == results[1]


# -- the pool: OpenMP's static assignment, one team per region -----------------------
GUFUNC = ctypes.CFUNCTYPE(
    None,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.c_void_p,
)


def _parallel_for(lib, pieces: int, threads: int) -> dict[int, tuple[int, int]]:
    """Run a region of ``pieces`` on ``threads``; piece -> (thread id, count)."""
    tid = _fn(lib, "pkrt_get_thread_id", ctypes.c_ssize_t)
    count = _fn(lib, "pkrt_get_num_threads", ctypes.c_ssize_t)
    base = (ctypes.c_int64 * max(pieces, 1))()
    seen: dict[int, tuple[int, int]] = {}

    def body(args, dims, steps, data):
        assert dims[0] == 1
        piece = (args[0] - ctypes.addressof(base)) // 8
        seen[piece] = (tid(), count())

    fn = GUFUNC(body)
    args = (ctypes.c_void_p * 1)(ctypes.addressof(base))
    dims = (ctypes.c_size_t * 1)(pieces)
    steps = (ctypes.c_size_t * 1)(8)
    _fn(
        lib,
        "pkrt_parallel_for",
        None,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_size_t,
        ctypes.c_int,
    )(ctypes.cast(fn, ctypes.c_void_p), args, dims, steps, None, 0, 1, threads)
    return seen


def _static(pieces: int, threads: int) -> dict[int, int]:
    """libgomp's schedule(static): contiguous runs, the first n % t one longer."""
    owner, q, extra = {}, pieces // threads, pieces % threads
    for t in range(threads):
        n, first = q + (t < extra), t * q + min(t, extra)
        owner.update(dict.fromkeys(range(first, first + n), t))
    return owner


@pytest.fixture
def unset_count(lib):
    """A region sets its caller's count (OpenMP's master does): unset it after."""
    yield
    _fn(lib, "pkrt_set_num_threads", None, ctypes.c_int)(0)


@pytest.mark.usefixtures("unset_count")
@pytest.mark.parametrize(
    ("pieces", "threads"), [(4, 4), (7, 3), (2, 5), (1, 1), (10, 4), (0, 3)]
)
def test_pieces_go_to_threads_as_openmps_static_schedule(lib, pieces, threads):
    seen = _parallel_for(lib, pieces, threads)
    assert {p: t for p, (t, _) in seen.items()} == _static(pieces, threads)
    assert {n for _, n in seen.values()} <= {threads}
    assert lib.pkrt_get_thread_id() == 0  # the caller is thread 0, then itself again


@pytest.mark.usefixtures("unset_count")
def test_regions_from_several_threads_at_once_each_get_a_team(lib):
    results, errors = {}, []

    def run(i: int) -> None:
        try:
            for _ in range(20):
                results[i] = _parallel_for(lib, 9, 3)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    want = _static(9, 3)
    assert all({p: t for p, (t, _) in r.items()} == want for r in results.values())


def test_the_thread_count_is_numbas_and_set_per_thread(lib):
    from numba.core import config

    get = _fn(lib, "pkrt_get_num_threads", ctypes.c_ssize_t)
    set_ = _fn(lib, "pkrt_set_num_threads", None, ctypes.c_int)
    assert lib.pkrt_default_num_threads() == config.NUMBA_NUM_THREADS
    other = []
    set_(1)
    try:
        thread = threading.Thread(target=lambda: other.append(get()))
        thread.start()
        thread.join()
        assert get() == 1 and other == [config.NUMBA_NUM_THREADS]
    finally:
        set_(0)  # unset: the default (or Numba's count) again


def test_numba_num_threads_sets_the_default(run_env):
    code = (
        "import json; from polykernel.native.runtime import load_runtime\n"
        "print(json.dumps(load_runtime().pkrt_default_num_threads()))"
    )
    # A child of the jax zygote: the runtime library, not loaded there, reads the
    # child's NUMBA_NUM_THREADS when the child loads it.
    env = dict(run_env, NUMBA_NUM_THREADS="3")
    assert last_json(run_python(code=code, env=env, forked=True)) == 3


# -- the Python half: Numba's rules for raising ---------------------------------------
def test_raise_args_follows_numba_do_raise():
    assert runtime.raise_args((ValueError, ("bad", 3), None)) == (
        ValueError,
        ("bad", 3),
        1,
    )
    assert runtime.raise_args(IndexError) == (IndexError, None, 1)
    err = KeyError("k")
    assert runtime.raise_args(err) == (KeyError, err, 0)
    with pytest.raises(TypeError, match="must derive from BaseException"):
        runtime.raise_args(3)
    with pytest.raises(RuntimeError, match="No active exception to reraise"):
        runtime.raise_args(None)
    with pytest.raises(TypeError, match="exactly 3 arguments"):
        runtime.raise_args((ValueError, ()))


class Placeholder:
    """Stands for llvmlite's IR values in a pickled exception description."""


def test_an_exception_description_unpickles_without_llvmlite(monkeypatch):
    monkeypatch.setattr(Placeholder, "__module__", "llvmlite.not_installed")
    module = type(sys)("llvmlite.not_installed")
    module.Placeholder = Placeholder
    monkeypatch.setitem(sys.modules, "llvmlite.not_installed", module)
    data = pickle.dumps((ValueError, ("at", Placeholder(), "and", Placeholder()), None))
    monkeypatch.delitem(sys.modules, "llvmlite.not_installed")
    exc, args, loc = runtime.build_excinfo(data, (3, 4.5))
    assert (exc, args, loc) == (ValueError, ("at", 3, "and", 4.5), None)
    first = runtime.unpickle(1234, pickle.dumps((KeyError, ("x",))), b"h" * 20)
    assert runtime.unpickle(1234, b"", b"h" * 20) is first  # memoised, as Numba's
