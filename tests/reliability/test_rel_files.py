"""Damaged files and bad benchmark-harness arguments: clear errors, nothing breaks.

Tables: ``RESULT_FILES`` (results files a user might load: empty, truncated,
hand-edited, written by another tool), ``HARNESS`` (``BenchmarkConfig``,
``benchmark_function``, ``BenchmarkResult`` methods, ``XLACustomKernel.benchmark``),
``CACHE_DAMAGE`` (a damaged cache root: maintenance still works) and
``DEFAULTS_DAMAGE`` (a damaged saved-defaults file or tuned table: a warning, then
it is usable).
The damaged Numba handler cache is checked in a new process at the end (a child
of the test's jax zygote, which has not imported Numba nor loaded any handler).
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import textwrap
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from dispatch_support import entry
from reliability_support import F3, assert_usable, bad, run_case
from subprocess_support import run_python

import polykernel as pk
from polykernel import config
from polykernel.benchmark import (
    BenchmarkConfig,
    BenchmarkRecord,
    BenchmarkResult,
    benchmark_function,
)
from polykernel.cache import admin as cache_admin
from polykernel.dispatch import Scope, legacy, table, writing
from polykernel.errors import PolykernelWarning

_TMP: list[Path] = []  # the running test's tmp_path: the rows are built at import
_GOOD = {"platform": "cpu", "backend": "numba", "label": "n=1", "mean_ms": 1.0}
_HEADER = "platform,backend,label,mean_ms,success,kernel_kwargs,n\n"


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path):
    _TMP.append(tmp_path)
    yield
    _TMP.pop()


def _load(name: str, content: str | bytes, **kw):
    def call():
        path = _TMP[-1] / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return BenchmarkResult.load(path, **kw)

    return call


def _json(records, **extra) -> str:
    return json.dumps({"primitive_name": "p", "records": records, **extra})


RESULT_FILES = [
    bad("json-empty", _load("empty.json", ""),
        ValueError, r"empty.json' is empty; it holds no benchmark result"),
    bad("json-whitespace", _load("blank.json", " \n\t\n"),
        ValueError, r"blank.json' is empty"),
    bad("csv-empty", _load("empty.csv", ""),
        ValueError, r"empty.csv' is empty"),
    bad("pkl-empty", _load("empty.pkl", b""),
        ValueError, r"empty.pkl' is empty"),
    bad("json-truncated", _load("cut.json", _json([_GOOD])[:30]),
        ValueError, r"cut.json' is not valid JSON"),
    bad("json-not-utf8", _load("bin.json", b"\xff\xfe\x00garbage"),
        ValueError, r"bin.json' is not a UTF-8 text file"),
    bad("json-top-level-list", _load("list.json", "[1, 2]"),
        ValueError, r"list.json' is not a benchmark result file"),
    bad("json-other-tool", _load("other.json", '{"format": "other", "records": []}'),
        ValueError, r"other.json' is not a benchmark result file"),
    bad("json-future-version", _load("v9.json", _json([], version=9)),
        ValueError, r"v9.json' has format version 9"),
    bad("json-records-number", _load("rn.json", _json(3)),
        ValueError, r"rn.json', field 'records': expected a list of records, got 3"),
    bad("json-records-null", _load("rnull.json", _json(None)),
        ValueError, r"rnull.json', field 'records': expected a list .* got None"),
    bad("json-records-object", _load("rd.json", _json({"a": 1})),
        ValueError, r"rd.json', field 'records': expected a list"),
    bad("json-records-missing", _load("rm.json", '{"primitive_name": "p"}'),
        ValueError, r"rm.json', field 'records'"),
    bad("json-record-number", _load("r3.json", _json([_GOOD, 3])),
        ValueError, r"r3.json', record 1: expected an object .* got 3 \(int\)"),
    bad("json-record-null", _load("r0.json", _json([None])),
        ValueError, r"r0.json', record 0: expected an object .* got None"),
    bad("json-record-string", _load("rs.json", _json(["cpu"])),
        ValueError, r"rs.json', record 0: expected an object"),
    bad("json-record-missing-field", _load("mf.json", _json([{"platform": "cpu"}])),
        ValueError, r"mf.json', record 0: missing field\(s\) \['backend', 'label'\]"),
    bad("json-field-mean-string", _load("ms.json", _json([{**_GOOD, "mean_ms": "1"}])),
        ValueError, r"ms.json', record 0, field 'mean_ms': expected a number or null"),
    bad("json-field-success-string",
        _load("ss.json", _json([{**_GOOD, "success": "yes"}])),
        ValueError, r"record 0, field 'success': expected true or false"),
    bad("json-field-kwargs-list",
        _load("kl.json", _json([{**_GOOD, "kernel_kwargs": [1]}])),
        ValueError, r"record 0, field 'kernel_kwargs': expected an object"),
    bad("json-field-n-float", _load("nf.json", _json([{**_GOOD, "n": 2.5}])),
        ValueError, r"record 0, field 'n': expected an integer, got 2.5"),
    bad("json-field-label-null", _load("ln.json", _json([{**_GOOD, "label": None}])),
        ValueError, r"record 0, field 'label': expected a string, got None"),
    bad("json-name-number",
        _load("pn.json", json.dumps({"primitive_name": 5, "records": []})),
        ValueError, r"pn.json', field 'primitive_name': expected a string, got 5"),
    bad("json-deep-nesting", _load("deep.json", "[" * 100_000 + "]" * 100_000),
        ValueError, r"deep.json' is not valid JSON"),
    bad("csv-missing-columns", _load("cols.csv", "a,b\n1,2\n"),
        ValueError, r"cols.csv' is not a benchmark result CSV \(missing columns"),
    bad("csv-non-numeric-cell", _load("nn.csv", _HEADER + "cpu,numba,x,abc,,,\n"),
        ValueError, r"nn.csv', line 2, field 'mean_ms': expected a number or null, "
        r"got 'abc'"),
    bad("csv-bad-bool-cell", _load("bb.csv", _HEADER + "cpu,numba,x,1,maybe,,\n"),
        ValueError, r"bb.csv', line 2, field 'success': expected true or false"),
    bad("csv-bad-json-cell", _load("bj.csv", _HEADER + "cpu,numba,x,1,true,{oops,\n"),
        ValueError, r"bj.csv', line 2, field 'kernel_kwargs': expected an object"),
    bad("csv-non-integer-n", _load("ni.csv", _HEADER + "cpu,numba,x,1,true,,2.5\n"),
        ValueError, r"ni.csv', line 2, field 'n': expected an integer"),
    bad("csv-short-row", _load("short.csv", _HEADER + "cpu,numba\n"),
        ValueError, r"short.csv', line 2: the row has fewer cells than the header"),
    bad("csv-long-row", _load("long.csv", _HEADER + "cpu,numba,x,1,true,,2,extra,1\n"),
        ValueError, r"long.csv', line 2: the row has 2 more cell\(s\) than the header "
        r"\(\['extra', '1'\]\); a cell holding a comma must be quoted"),
    bad("pkl-garbage", _load("junk.pkl", b"not a pickle at all"),
        ValueError, r"junk.pkl' is not a readable pickle"),
    bad("pkl-other-object", _load("dict.pkl", pickle.dumps({"a": 1})),
        ValueError, r"dict.pkl' holds a dict, not a BenchmarkResult"),
    bad("load-format-unknown", _load("fmt.json", _json([]), format="xml"),
        ValueError, r"unsupported format 'xml' for .*fmt.json'"),
    bad("load-missing-file", lambda: BenchmarkResult.load(_TMP[-1] / "nope.json"),
        FileNotFoundError, r"nope.json' does not exist"),
    bad("load-directory", lambda: BenchmarkResult.load(_TMP[-1]),
        FileNotFoundError, r"is not a file"),
    bad("load-path-int", lambda: BenchmarkResult.load(3),
        TypeError, r"BenchmarkResult.load: path must be a str or os.PathLike \(got "
        r"int: 3\)"),
]  # fmt: skip


def _result() -> BenchmarkResult:
    return BenchmarkResult([BenchmarkRecord(**_GOOD)], primitive_name="p")


def _op_with_data(name: str, data_fn) -> pk.XLACustomKernel:
    op = pk.XLACustomKernel(f"reliability.files.{name}")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x + 1, platform="cpu")
    op.def_call(lambda x: op(x, outs=F3))
    op.def_benchmark_data(data_fn)
    return op


def _raising_data(*, platform):
    raise RuntimeError("data boom")


BENCH_RAISES = _op_with_data("raises", _raising_data)
BENCH_NOT_LIST = _op_with_data("not_list", lambda *, platform: 3)
BENCH_OK = _op_with_data(
    "ok", lambda *, platform: [BenchmarkConfig("n=3", (np.ones(3, np.float32),))]
)

HARNESS = [
    bad("config-name-int", lambda: BenchmarkConfig(3),
        TypeError, r"BenchmarkConfig: name must be a non-empty string, got 3"),
    bad("config-kernel-kwargs-list", lambda: BenchmarkConfig("a", (), [1]),
        TypeError, r"BenchmarkConfig 'a': kernel_kwargs must be a dict, got list"),
    bad("config-work-number", lambda: BenchmarkConfig("a", (), {}, {}, work=3),
        TypeError, r"work must be \(amount > 0, unit\)"),
    bad("benchmark_function-not-callable", lambda: benchmark_function(3, 1, 1),
        TypeError, r"benchmark_function: fn must be callable \(got int: 3\)"),
    bad("benchmark_function-n_runs-zero", lambda: benchmark_function(jnp.sin, 1, 0),
        ValueError, r"n_runs must be an integer >= 1, got 0"),
    bad("benchmark_function-n_warmup-negative",
        lambda: benchmark_function(jnp.sin, -1, 1, data=(1.0,)),
        ValueError, r"n_warmup must be an integer >= 0, got -1"),
    bad("benchmark_function-raises",
        lambda: benchmark_function(lambda: 1 / 0, 0, 1),
        ZeroDivisionError, r"division by zero"),
    bad("combine-not-iterable", lambda: BenchmarkResult.combine(3),
        TypeError, r"combine: results must be an iterable of BenchmarkResult"),
    bad("combine-item-int", lambda: BenchmarkResult.combine([_result(), 3]),
        TypeError, r"combine: results\[1\] is a int, not a BenchmarkResult"),
    bad("result-records-not-records", lambda: BenchmarkResult([1, 2]),
        TypeError, r"BenchmarkResult"),
    bad("save-format-unknown",
        lambda: _result().save(_TMP[-1] / "r.json", format="xml"),
        ValueError, r"BenchmarkResult.save: unsupported format 'xml'"),
    bad("save-path-int", lambda: _result().save(3),
        TypeError, r"BenchmarkResult.save: path must be a str or os.PathLike"),
    bad("save-under-a-file",
        lambda: _result().save(Path(__file__) / "out.json"),
        OSError, r"BenchmarkResult.save: cannot write '.*test_rel_files.py/out.json'"),
    bad("table-unknown-option", lambda: _result().table(colour="red"),
        TypeError, r"colour"),
    bad("benchmark-platform-unknown",
        lambda: BENCH_OK.benchmark(platform="xpu", n_runs=1, n_warmup=0),
        ValueError, r"no backend is registered for platform 'xpu'"),
    bad("benchmark-backends-unknown",
        lambda: BENCH_OK.benchmark(platform="cpu", backends=["warp"], n_runs=1),
        ValueError, r"warp"),
    bad("benchmark-n_runs-zero", lambda: BENCH_OK.benchmark(platform="cpu", n_runs=0),
        ValueError, r"n_runs must be an integer >= 1"),
    bad("benchmark-data-raises", lambda: BENCH_RAISES.benchmark(platform="cpu"),
        RuntimeError, r"data boom"),
    bad("benchmark-data-not-list",
        lambda: BENCH_NOT_LIST.benchmark(platform="cpu", n_runs=1),
        TypeError, r"BenchmarkConfig"),
]  # fmt: skip


@pytest.mark.parametrize("case", RESULT_FILES)
def test_damaged_result_files(case, tmp_path):
    run_case(case)
    # a good file still loads after a bad one
    good = tmp_path / "good.json"
    _result().save(good)
    assert [r.backend for r in BenchmarkResult.load(good)] == ["numba"]


@pytest.mark.parametrize("case", HARNESS)
def test_benchmark_harness_bad_inputs(case):
    run_case(case)


def test_empty_result_round_trips_but_empty_file_does_not(tmp_path):
    # An empty *result* saved by save() is a valid file; an empty *file* is not.
    for suffix in ("json", "csv"):
        path = BenchmarkResult([], primitive_name="p").save(tmp_path / f"e.{suffix}")
        assert len(BenchmarkResult.load(path)) == 0
        path.write_text("")
        with pytest.raises(ValueError, match=r"is empty; it holds no benchmark"):
            BenchmarkResult.load(path)


# -- the cache root ------------------------------------------------------------------
def _damage(kind: str) -> None:
    root = config.cache_root()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    for section in ("native", "numba"):
        (root / section).mkdir(exist_ok=True, mode=0o700)
    native = root / "native"
    if kind == "garbage-meta":
        entry = native / ("a" * 40)
        entry.mkdir(exist_ok=True, mode=0o700)
        (entry / "meta.json").write_text("{not json")
        (entry / "lib.so").write_bytes(b"\0" * 100)
    elif kind == "entry-is-a-file":
        (native / ("b" * 40)).write_bytes(b"x" * 10)
    elif kind == "broken-symlink":
        link = native / ("c" * 40)
        if not link.is_symlink():
            link.symlink_to(root / "does-not-exist")
    elif kind == "stray-top-level-file":
        (root / "stray.bin").write_bytes(b"x" * 10)
    elif kind == "empty-entry-dir":
        (root / "numba" / ("d" * 40)).mkdir(exist_ok=True, mode=0o700)
    elif kind == "locks-is-a-file":
        locks = root / "numba" / "locks"
        if not locks.exists():
            locks.write_bytes(b"")


CACHE_DAMAGE = [
    "garbage-meta",
    "entry-is-a-file",
    "broken-symlink",
    "stray-top-level-file",
    "empty-entry-dir",
]


@pytest.mark.bad_input
@pytest.mark.parametrize("kind", CACHE_DAMAGE)
def test_damaged_cache_root_maintenance_still_works(kind, tmp_path, monkeypatch):
    # A root of its own: the run's is shared by every process of the run.
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path / "cache"))
    _damage(kind)
    report = cache_admin.info()
    assert report["exists"] and report["files"] >= 0
    assert cache_admin.prune(max_bytes=10**12) == 0  # under the cap: nothing goes
    assert_usable()


# -- saved defaults and tuned tables: one warning each, a damaged table refused ------
SAVED = pk.XLACustomKernel("reliability.files.saved")
SAVED.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: x + 1)
SAVED.def_kernel("other", "cpu", lambda outs, **kw: lambda x: x + 2)
DEFAULTS_DAMAGE = [  # content, the warning of a saved-defaults file, of a tuned table
    pytest.param(b"", r"\(Expecting value", r"not valid JSON", id="empty"),
    pytest.param(b"{oops", r"\(Expecting property", r"not valid JSON", id="cut"),
    pytest.param(b"\xff\xfe", r"not UTF-8 text", r"not UTF-8 text", id="not-utf8"),
    pytest.param(b"null", r"\(expected an object", r"not a polykernel", id="null"),
]


@pytest.mark.bad_input
@pytest.mark.parametrize(("content", "old_warning", "warning"), DEFAULTS_DAMAGE)
def test_damaged_saved_defaults_and_tables_warn_and_recover(
    tmp_path, monkeypatch, content, old_warning, warning
):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path))
    (tmp_path / "defaults.json").write_bytes(content)
    with pytest.warns(PolykernelWarning, match=old_warning):
        assert legacy.legacy_entries() == {}
    writing.record_entries([entry(SAVED, None, "other", {}, scope=Scope.SAVED)])
    np.testing.assert_array_equal(SAVED(jnp.zeros(3), outs=F3), [2, 2, 2])
    assert legacy.clear_legacy() == [] and not (tmp_path / "defaults.json").exists()
    (tmp_path / "tuned.json").write_bytes(content)
    with pytest.warns(pk.TuningWarning, match=warning):
        assert table.entries_for(SAVED.name) == []
    with pytest.raises(pk.TuningError, match=r"it is not rewritten\. Move it away"):
        writing.record_entries([entry(SAVED, None, "jax_raw", {}, scope=Scope.SAVED)])
    assert (tmp_path / "tuned.json").read_bytes() == content
    assert_usable()


# -- the Numba handler cache, damaged between two processes ---------------------------
_KERNEL = """
@numba.njit
def times_{k}(x, out):
    for i in range(out.size):
        out[i] = x[i] * {k}
"""

_CHILD = """
import sys, jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, {here!r})
import corrupt_kernels as ck
import polykernel as pk
for k in range({n}):
    kernel = pk.numba_kernel(ck.KERNELS[k], jax.ShapeDtypeStruct((4,), jnp.float32))
    got = kernel(jnp.arange(4, dtype=jnp.float32))
    np.testing.assert_array_equal(got, np.arange(4) * (k + 2))
print("all correct")
"""

NUMBA_DAMAGE = {
    "truncated-object": lambda e: _truncate(e / "handler.so"),
    "garbage-object": lambda e: (e / "handler.so").write_bytes(
        os.urandom((e / "handler.so").stat().st_size)
    ),
    "missing-object": lambda e: (e / "handler.so").unlink(),
    "garbage-meta": lambda e: (e / "meta.json").write_text("{oops"),
    "meta-is-a-list": lambda e: (e / "meta.json").write_text("[1, 2]"),
    "meta-missing-fields": lambda e: _edit_meta(e, drop="externals"),
    "meta-wrong-types": lambda e: _edit_meta(e, externals=3),
}


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_meta(entry: Path, drop: str | None = None, **changes) -> None:
    meta = json.loads((entry / "meta.json").read_text())
    meta.pop(drop, None)
    meta.update(changes)
    (entry / "meta.json").write_text(json.dumps(meta))


@pytest.mark.bad_input
@pytest.mark.slow
def test_damaged_numba_cache_entries_rebuild_in_a_new_process(
    tmp_path, run_env, monkeypatch
):
    """Each kernel's cache entry is damaged a different way; a new process still
    computes every kernel correctly (each damaged entry is a miss, then rebuilt)."""
    # A root of its own, this process's and the child's (the run's is shared).
    cache = str(tmp_path / "cache")
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", cache)
    run_env = dict(run_env, POLYKERNEL_CACHE_DIR=cache)
    damage = list(NUMBA_DAMAGE.values())
    factors = range(2, len(damage) + 2)
    (tmp_path / "corrupt_kernels.py").write_text(
        "import numba\n"
        + "".join(_KERNEL.format(k=k) for k in factors)
        + f"KERNELS = [{', '.join(f'times_{k}' for k in factors)}]\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        import corrupt_kernels as ck
    finally:
        sys.path.remove(str(tmp_path))
    numba_root = config.cache_root() / "numba"
    for kernel, hurt in zip(ck.KERNELS, damage, strict=True):
        before = set(numba_root.glob("*/meta.json")) if numba_root.exists() else set()
        pk.numba_kernel(kernel, F3)(jnp.ones(3, jnp.float32))
        (new,) = [  # this kernel's entry (its name is in the target name)
            m
            for m in set(numba_root.glob("*/meta.json")) - before
            if kernel.__name__ in m.read_text()
        ]
        hurt(new.parent)
    child = _CHILD.format(here=str(tmp_path), n=len(damage))
    code = textwrap.dedent(child)
    out = run_python(code=code, env=run_env, timeout=240, forked=True)
    assert "all correct" in out
