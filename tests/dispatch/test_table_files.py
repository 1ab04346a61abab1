"""The user's tuned table as a file: damaged, foreign, newer, linked or special
files cost a warning, never a call; a table this version does not own is never
rewritten; a symbolic link stays one; nothing it cannot read is lost."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dispatch_support import N, entry, make, spec
from tuning_ops import configs

import polykernel as pk
from polykernel.dispatch import files, writing

FORMAT = {"format": "polykernel.tuned", "version": 2}


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "config").mkdir(mode=0o700)
    return tmp_path / "config"


def _fresh(op) -> dict:
    """A fresh entry of ``op`` at the call's bucket, choosing numba(block=4)."""
    return entry(op, (10,), "numba", {"block": 4}).to_json()


def _junk(op, **changes) -> dict:
    return {**_fresh(op), "bucket": [12], **changes}


def _table(op, *junk: dict, **top) -> str:
    return json.dumps({**FORMAT, "entries": {op.name: [_fresh(op), *junk]}, **top})


def _call(op, n: int) -> np.ndarray:
    """One ordinary jitted call (a new lowering for each n), checked."""
    x = jnp.arange(n, dtype=jnp.float32)
    got = np.asarray(jax.jit(lambda v: op(v, outs=spec(n)))(x))
    np.testing.assert_array_equal(got, 2 * np.arange(n, dtype=np.float32))
    return got


def _bounded(fn: Callable[[], object], path: Path, seconds: float = 30.0) -> None:
    """Run ``fn`` in a thread; fail (not hang) if it does not return in time. A
    reader stuck opening a FIFO at ``path`` is released by opening it to write."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as err:  # re-raised in the test's thread
            failure.append(err)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"reading {path} did not return within {seconds} s")
    if failure:
        raise failure[0]


def _nest(path: Path, op) -> None:
    path.write_text("[" * 100_000 + "]" * 100_000)


def _link_to_valid(path: Path, op) -> None:
    real = path.parent.parent / "elsewhere" / "real.json"
    real.parent.mkdir()
    real.write_text(_table(op))
    path.symlink_to(real)


# (how to damage it, what the one warning says, whether its good entry is used)
DAMAGE = {
    "junk-candidates": (
        lambda p, op: p.write_text(_table(op, _junk(op, candidates="junk"))),
        r"1 malformed entry skipped \(first: .*candidates must be a list\); its "
        r"other entries are used",
        True,
    ),
    "junk-candidate-items": (
        lambda p, op: p.write_text(_table(op, _junk(op, candidates=[1, None]))),
        r"1 malformed entry skipped \(first: .*a candidate must be an object",
        True,
    ),
    "junk-params": (
        lambda p, op: p.write_text(
            _table(op, _junk(op, winner={"backend": "numba", "params": [4]}))
        ),
        r"malformed entry skipped \(first: .*params must be an object, got list",
        True,
    ),
    "list-value": (
        lambda p, op: p.write_text(
            _table(op, _junk(op, winner={"backend": "numba", "params": {"block": [4]}}))
        ),
        r"malformed entry skipped \(first: .*not a value: \[4\]",
        True,
    ),
    "wrong-types": (
        lambda p, op: p.write_text(
            _table(op, _junk(op, platform=3), _junk(op, bucket="12"))
        ),
        r"2 malformed entries skipped \(first: .*platform must be a non-empty string",
        True,
    ),
    "entries-of-a-primitive-not-a-list": (
        lambda p, op: p.write_text(
            json.dumps({**FORMAT, "entries": {op.name: [_fresh(op)], "other": 5}})
        ),
        r"1 malformed entry skipped \(first: other: not a list\)",
        True,
    ),
    "deeply-nested": (
        _nest,
        r"it is nested too deeply to be a table; it is ignored",
        False,
    ),
    "invalid-json": (
        lambda p, op: p.write_text(_table(op)[:-3]),
        r"it is not valid JSON \(.*\); it is ignored: dispatch uses the other tables",
        False,
    ),
    "not-utf8": (
        lambda p, op: p.write_bytes(b"\xff\xfe{}"),
        r"it is not UTF-8 text \(invalid start byte at byte 0\)",
        False,
    ),
    "foreign": (
        lambda p, op: p.write_text(json.dumps({"format": "other", "entries": {}})),
        r"it is not a polykernel tuned table \(format 'polykernel.tuned'\)",
        False,
    ),
    "newer": (
        lambda p, op: p.write_text(_table(op, version=99)),
        r"it is table version 99; this polykernel reads 1 to 2; it is ignored",
        False,
    ),
    "entries-not-an-object": (
        lambda p, op: p.write_text(json.dumps({**FORMAT, "entries": [1]})),
        r"its 'entries' is not an object; it is ignored",
        False,
    ),
    "symlink-to-a-valid-table": (
        _link_to_valid,
        r"it is a symbolic link to .*real.json; it is read through the link, and a "
        r"save replaces the file the link names \(the link is kept\)",
        True,
    ),
    "dangling-symlink": (
        lambda p, op: p.symlink_to(p.parent / "nowhere.json"),
        r"it is a symbolic link to nothing; it is ignored",
        False,
    ),
    "symlink-loop": (
        lambda p, op: p.symlink_to(p),
        r"it cannot be examined \(Too many levels of symbolic links\); it is ignored",
        False,
    ),
    "fifo": (
        lambda p, op: os.mkfifo(p),
        r"it is a FIFO, not a regular file; it is ignored",
        False,
    ),
    "directory": (
        lambda p, op: p.mkdir(),
        r"it is a directory, not a regular file; it is ignored",
        False,
    ),
    "too-large": (
        lambda p, op: os.truncate(p, files.MAX_BYTES + 1),  # sparse: nothing written
        rf"it is {files.MAX_BYTES + 1} bytes \(at most {files.MAX_BYTES} are read\)",
        False,
    ),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_bad_table_is_one_warning_and_calls_stay_correct(kind, config):
    damage, message, used = DAMAGE[kind]
    seen: list = []
    op = make(f"dispatch.files.read.{kind}", seen)
    path = config / "tuned.json"
    if kind == "too-large":
        path.touch()
    damage(path, op)
    with pytest.warns(pk.TuningWarning) as caught:
        _bounded(lambda: _call(op, N), path)
    tuning = [w for w in caught if issubclass(w.category, pk.TuningWarning)]
    assert len(tuning) == 1, [str(w.message) for w in caught]
    text = str(tuning[0].message)
    assert text.startswith(f"polykernel tuned table {path}: ")
    assert re.search(message, text), text
    assert seen[-1] == (("numba", 4) if used else ("jax_raw", None))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: a new lowering is silent
        _bounded(lambda: _call(op, 2 * N), path)
        decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert decision.reason == ("exact" if used else "default")


# -- writing ---------------------------------------------------------------------------
REFUSED = {
    "newer": (lambda p, op: p.write_text(_table(op, version=99)),
              r"it was written by a newer polykernel \(table version 99; this one "
              r"writes 2\); it is not rewritten\. Upgrade polykernel, or move it away"),
    "foreign": (lambda p, op: p.write_text('{"format": "other"}'),
                r"it is not a polykernel tuned table \(format 'polykernel.tuned'\); "
                r"it is not rewritten\. Move it away \(or delete it\), or point "
                r"\$POLYKERNEL_CONFIG_DIR at another directory, or tune with "
                r"save=False"),
    "damaged": (lambda p, op: p.write_text("{oops"),
                r"it is not valid JSON \(.*\); it is not rewritten\. Move it away"),
    "nested": (_nest, r"it is nested too deeply to be a table; it is not rewritten"),
    "entries-not-an-object": (
        lambda p, op: p.write_text(json.dumps({**FORMAT, "entries": [1]})),
        r"its 'entries' is not an object; it is not rewritten"),
    "directory": (lambda p, op: p.mkdir(),
                  r"it is a directory, not a regular file; it is not rewritten"),
    "fifo": (lambda p, op: os.mkfifo(p),
             r"it is a FIFO, not a regular file; it is not rewritten"),
    "dangling-symlink": (lambda p, op: p.symlink_to(p.parent / "nowhere.json"),
                         r"it is a symbolic link to nothing; it is not rewritten"),
    "symlink-loop": (lambda p, op: p.symlink_to(p),
                     r"it cannot be examined \(Too many levels of symbolic links\); "
                     r"it is not rewritten"),
}  # fmt: skip


def _snapshot(path: Path) -> object:
    if path.is_symlink():
        return ("link", os.readlink(path))
    if path.is_file():
        return path.read_bytes()
    return os.stat(path).st_mode


def _tunable(name: str, seen: list) -> pk.XLACustomKernel:
    op = make(name, seen)
    op.def_call(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    return op


@pytest.mark.parametrize("kind", REFUSED)
def test_a_table_it_does_not_own_is_refused_before_measuring_and_left_as_is(
    kind, config
):
    damage, message = REFUSED[kind]
    seen: list = []
    op = _tunable(f"dispatch.files.write.{kind}", seen)
    path = config / "tuned.json"
    damage(path, op)
    before = _snapshot(path)
    pattern = rf"polykernel tuned table {path}: {message}"
    started = time.perf_counter()
    with pytest.raises(pk.TuningError, match=pattern):
        op.tune(configs=configs((64,)), platform="cpu", case_seconds=0.05, passes=1)
    assert seen == [] and time.perf_counter() - started < 2.0  # nothing measured
    with pytest.raises(pk.TuningError, match=pattern):
        writing.record_entries([entry(op, (10,), "numba", {"block": 4})])
    with pytest.raises(pk.TuningError, match=pattern):
        writing.clear_entries([op.name])
    assert _snapshot(path) == before


@pytest.mark.parametrize("kind", ["newer", "fifo", "directory"])
def test_tuning_without_saving_works_beside_a_table_it_does_not_own(kind, config):
    damage, _ = REFUSED[kind]
    seen: list = []
    op = _tunable(f"dispatch.files.no_save.{kind}", seen)
    path = config / "tuned.json"
    damage(path, op)
    before = _snapshot(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pk.TuningWarning)  # the table, when read
        report = op.tune(configs=configs((64,)), platform="cpu", backends=["jax_raw"],
                         case_seconds=0.05, passes=1, save=False)  # fmt: skip
    assert report.saved_to is None and seen
    assert _snapshot(path) == before


def test_tune_clear_on_a_newer_table_exits_1_and_leaves_it(config, capsys):
    from polykernel.cli.main import main

    path = config / "tuned.json"
    path.write_text(_table(make("dispatch.files.cli_newer"), version=99))
    before = path.read_bytes()
    for argv in (["tune", "--clear", "dispatch.files.cli_newer"], ["tune", "--clear"],
                 ["defaults", "clear", "dispatch.files.cli_newer"]):  # fmt: skip
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert (
            f"error: polykernel tuned table {path}: it was written by a newer " in err
        )
        assert "it is not rewritten. Upgrade polykernel" in err
    assert path.read_bytes() == before


def test_a_symlinked_table_stays_a_link_and_its_target_gets_the_entries(config):
    op, other = make("dispatch.files.link"), make("dispatch.files.link_other")
    real = config.parent / "dotfiles" / "tuned.json"
    real.parent.mkdir()
    real.write_text(json.dumps({**FORMAT, "entries": {other.name: [_fresh(other)]}}))
    path = config / "tuned.json"
    path.symlink_to(real)
    writing.record_entries([entry(op, (10,), "numba", {"block": 2})])
    assert path.is_symlink() and os.readlink(path) == str(real)
    assert sorted(json.loads(real.read_text())["entries"]) == sorted(
        [op.name, other.name]
    )
    assert sorted(os.listdir(real.parent)) == ["tuned.json"]  # no temporary left
    with pytest.warns(pk.TuningWarning, match=r"it is a symbolic link to .*dotfiles"):
        decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (decision.reason, dict(decision.params)) == ("exact", {"block": 2})


def test_a_config_dir_that_is_a_file_names_the_config_variable(tmp_path, monkeypatch):
    seen: list = []
    op = _tunable("dispatch.files.config_file", seen)
    for where in (tmp_path / "file", tmp_path / "file" / "below"):
        (tmp_path / "file").write_text("not a directory")
        monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(where))
        with pytest.raises(
            pk.TuningError,
            match=r"polykernel tuned table: the config directory .*file.* is not a "
            r"directory.*point \$POLYKERNEL_CONFIG_DIR at a directory you own",
        ) as caught:
            op.tune(configs=configs((64,)), platform="cpu", case_seconds=0.05, passes=1)
        assert "CACHE" not in str(caught.value) and seen == []
        with pytest.raises(pk.TuningError, match=r"\$POLYKERNEL_CONFIG_DIR") as caught:
            writing.record_entries([entry(op, (10,), "numba", {"block": 4})])
        assert "CACHE" not in str(caught.value)
        assert (tmp_path / "file").read_text() == "not a directory"


def test_a_config_dir_others_can_write_is_refused_before_measuring(config):
    seen: list = []
    op = _tunable("dispatch.files.shared_dir", seen)
    config.chmod(0o777)
    with pytest.raises(
        pk.TuningError,
        match=r"polykernel config: '.*config' is writable by group or others \(mode "
        r"777\); refusing to use it\. Run `chmod go-w .*` or point "
        r"\$POLYKERNEL_CONFIG_DIR elsewhere\. \(Or tune with save=False\.\)",
    ):
        op.tune(configs=configs((64,)), platform="cpu", case_seconds=0.05, passes=1)
    assert seen == [] and os.listdir(config) == []


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes into read-only directories (modes do not "
    "apply to it); the file and directory cases above cover the refusal"
)  # fmt: skip
def test_a_read_only_config_dir_is_refused_before_measuring(config):
    seen: list = []
    op = _tunable("dispatch.files.read_only", seen)
    config.chmod(0o500)
    try:
        with pytest.raises(
            pk.TuningError,
            match=r"cannot write to .*config \(the config directory .*config is there, "
            r"and it is read-only\)\. Point \$POLYKERNEL_CONFIG_DIR at a writable",
        ):
            op.tune(configs=configs((64,)), platform="cpu", case_seconds=0.05)
        assert seen == []
    finally:
        config.chmod(0o700)
