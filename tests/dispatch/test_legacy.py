"""Saved defaults of older versions (``defaults.json``): read once as saved-default
entries with one deprecation warning, listed and cleared by ``polykernel defaults``
(an alias of ``tune --show/--clear``), a damaged file one warning; and no other
module of ``src/`` names the file."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dispatch_support import N, entry, spec

import polykernel as pk
from polykernel.cli.main import main
from polykernel.dispatch import legacy, writing
from polykernel.dispatch.records import Scope

SRC = Path(pk.__file__).parent
DEPRECATED = (
    r"polykernel: .*defaults.json holds saved defaults of an older polykernel; they "
    r"are used as saved-default entries of the tuned table \(deprecated\)\. Save them "
    r"again with `polykernel benchmark \.\.\. --save-defaults`, which writes "
    r".*tuned.json, then `polykernel defaults clear` removes the old file\."
)


@pytest.fixture(autouse=True)
def config(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "config").mkdir(mode=0o700)
    return tmp_path / "config"


def _op(name: str) -> pk.XLACustomKernel:
    """cpu backends: jax_raw -> x + 1 (the default), fast -> x + 2."""
    op = pk.XLACustomKernel(f"dispatch.legacy.{name}")
    op.def_kernel("jax_raw", "cpu", lambda outs, **kw: lambda x: x + 1)
    op.def_kernel("fast", "cpu", lambda outs, **kw: lambda x: x + 2)
    return op


def _save(config: Path, data: object) -> Path:
    path = config / "defaults.json"
    path.write_text(json.dumps(data))
    return path


def _run(op) -> float:
    x = jnp.zeros(N, jnp.float32)
    got = np.asarray(jax.jit(lambda v: op(v, outs=spec()))(x))
    return float(got[0])


def test_a_legacy_default_is_a_saved_default_with_one_deprecation_warning(config):
    op = _op("used")
    _save(config, {op.name: {"cpu": "fast", "gpu": "warp"}})
    with pytest.warns(pk.PolykernelDeprecationWarning, match=DEPRECATED) as caught:
        decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert len(caught) == 1
    assert (decision.reason, decision.backend, decision.level) == (
        "saved_default", "fast", 5
    )  # fmt: skip
    assert decision.entry.source == str(config / "defaults.json")
    assert decision.entry.kernels is None and decision.entry.key.bucket is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert _run(op) == 2.0
        assert legacy.legacy_entries()[op.name][0].winner.backend == "fast"


def test_an_unregistered_backend_is_ignored_and_reported(config):
    op = _op("unknown_backend")
    _save(config, {op.name: {"cpu": "warp"}})
    with pytest.warns(pk.PolykernelDeprecationWarning, match=DEPRECATED):
        decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (decision.reason, decision.backend) == ("default", "jax_raw")
    ((stale, why),) = decision.stale
    assert (stale.winner.backend, why) == ("warp", "its backend 'warp' is not "
                                           "registered now")  # fmt: skip
    assert _run(op) == 1.0


def test_a_tuned_entry_and_a_saved_default_beat_a_legacy_one(config):
    op = _op("below")
    _save(config, {op.name: {"cpu": "fast"}})
    saved = entry(op, None, "jax_raw", {}, scope=Scope.SAVED)
    writing.record_entries([saved])
    with pytest.warns(pk.PolykernelDeprecationWarning, match=DEPRECATED):
        decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (decision.reason, decision.backend) == ("saved_default", "jax_raw")
    assert decision.entry.source.endswith("tuned.json")  # this device's, not "*"
    writing.record_entries([entry(op, (10,), "fast", {})])
    decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (decision.reason, decision.backend) == ("exact", "fast")


def test_defaults_show_lists_them_and_clear_removes_them(config, capsys):
    a, b = _op("cli_a"), _op("cli_b")
    path = _save(config, {a.name: {"cpu": "fast"}, b.name: {"cpu": "jax_raw"}})
    with pytest.warns(pk.PolykernelDeprecationWarning, match=DEPRECATED):
        assert main(["defaults", "show"]) == 0
    out, err = capsys.readouterr()
    assert "polykernel defaults show: an alias of `polykernel tune --show`" in err
    assert f"{a.name}: 1 entry" in out and f"{b.name}: 1 entry" in out
    assert "cpu any shape (saved default): fast" in out
    assert f"from {path}" in out
    assert main(["defaults", "clear", a.name]) == 0
    out, err = capsys.readouterr()
    assert "an alias of `polykernel tune --clear`" in err
    assert out == f"cleared 1 primitive: {a.name}\n"
    assert json.loads(path.read_text()) == {b.name: {"cpu": "jax_raw"}}
    assert main(["defaults", "clear", b.name]) == 0
    assert not path.exists()  # deleted once empty
    assert capsys.readouterr().out == f"cleared 1 primitive: {b.name}\n"
    assert main(["defaults", "clear"]) == 0
    assert capsys.readouterr().out == "cleared 0 primitives: -\n"


def test_tune_clear_removes_legacy_defaults_too(config, capsys):
    op = _op("tune_clear")
    path = _save(config, {op.name: {"cpu": "fast"}})
    writing.record_entries([entry(op, (10,), "fast", {})])
    assert main(["tune", "--clear"]) == 0
    assert capsys.readouterr().out == f"cleared 1 primitive: {op.name}\n"
    assert not path.exists()
    assert json.loads((config / "tuned.json").read_text())["entries"] == {}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{oops", r"not a saved-defaults file \(Expecting property name"),
        (b"[1, 2]", r"not a saved-defaults file \(expected an object \{primitive: "
         r"\{platform: backend\}\}\)"),
        (b"\xff\xfe", r"it is not UTF-8 text \(invalid start byte at byte 0\); they "
         r"are ignored"),
        (b"[" * 100_000, r"not a saved-defaults file \(maximum recursion depth"),
    ],
    ids=["invalid", "list", "not-utf8", "nested"],
)  # fmt: skip
def test_a_damaged_legacy_file_is_one_warning_and_clear_removes_it(
    config, content, message
):
    op = _op(f"damaged_{len(content)}")
    path = config / "defaults.json"
    path.write_bytes(content)
    with pytest.warns(pk.TuningWarning) as caught:
        decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert len(caught) == 1
    assert str(caught[0].message).startswith(f"polykernel saved defaults {path}: ")
    assert re.search(message, str(caught[0].message))
    assert decision.reason == "default"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _run(op) == 1.0
        assert legacy.clear_legacy([op.name]) == []  # a name: only what it reads
        assert path.exists()
        assert legacy.clear_legacy() == []  # everything: the damaged file too
        assert not path.exists()


def test_the_same_file_damaged_another_way_is_warned_about_again(config):
    # One process, one path (as two tests get when the first's tmp_path is deleted
    # and its name handed out again): a new problem is a new warning, the same
    # problem is not.
    op = _op("damaged_twice")
    path = config / "defaults.json"
    for content, problem in [(b"{oops", "Expecting property name"),
                             (b"[1, 2]", "expected an object")]:  # fmt: skip
        path.write_bytes(content)
        with pytest.warns(pk.TuningWarning) as caught:
            assert _run(op) == 1.0
        assert [problem in str(w.message) for w in caught] == [True]
    os.utime(path, ns=(0, 0))  # the same damage, the file read again: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _run(op) == 1.0 and legacy.legacy_entries() == {}


def test_wrong_value_types_keep_the_good_pairs(config):
    _save(config, {"a": {"cpu": 3, "gpu": "warp"}, "b": 7, "c": {}, "d": {"": "x"}})
    with pytest.warns(pk.PolykernelDeprecationWarning, match=DEPRECATED):
        found = legacy.legacy_entries()
    assert {n: [e.winner.backend for e in es] for n, es in found.items()} == {
        "a": ["warp"]
    }
    assert found["a"][0].key.platform == "gpu"


def test_a_directory_named_like_the_file_is_one_warning(config):
    (config / "defaults.json").mkdir()
    op = _op("directory")
    with pytest.warns(
        pk.TuningWarning,
        match=r"polykernel saved defaults .*defaults.json: it is a directory, not a "
        r"regular file; they are ignored\. Move it away or delete it\.",
    ):
        assert _run(op) == 1.0
    assert legacy.clear_legacy() == [] and (config / "defaults.json").is_dir()


def test_only_the_legacy_reader_names_the_file():
    named = sorted(
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "defaults.json" in p.read_text(encoding="utf-8")
    )
    assert named == ["dispatch/legacy.py"]
