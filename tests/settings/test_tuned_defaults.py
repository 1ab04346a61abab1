"""Persisted tuned defaults: file creation, merging, clearing, damaged files."""

from __future__ import annotations

import json
import stat

import pytest

from polykernel.errors import PolykernelWarning
from polykernel.settings import tuned_defaults as td


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    path = tmp_path / "cfg"
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(path))
    return path


def test_reading_never_creates_anything(cfg):
    assert td.load_defaults() == {}
    assert td.persisted_default("x.op", "cpu") is None
    assert td.clear_defaults() == []
    assert td.clear_defaults(["x.op"]) == []
    assert not cfg.exists()
    assert td.defaults_path() == cfg / "defaults.json"


def test_save_creates_private_dir_and_merges(cfg):
    td.save_defaults({"a.op": {"cpu": "numba"}, "b.op": {"gpu": "warp"}})
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o700
    td.save_defaults({"a.op": {"gpu": "triton"}, "b.op": {"gpu": "pallas"}})
    assert td.load_defaults() == {
        "a.op": {"cpu": "numba", "gpu": "triton"},
        "b.op": {"gpu": "pallas"},
    }
    assert td.persisted_default("a.op", "cpu") == "numba"
    assert td.persisted_default("a.op", "tpu") is None
    # Written atomically: only the final file, no temporary left behind.
    assert [p.name for p in cfg.iterdir()] == ["defaults.json"]
    assert json.loads((cfg / "defaults.json").read_text())["b.op"] == {"gpu": "pallas"}


def test_clear_some_then_all(cfg):
    td.save_defaults({"a.op": {"cpu": "numba"}, "b.op": {"cpu": "jax_raw"}})
    assert td.clear_defaults(["a.op", "zzz"]) == ["a.op"]
    assert td.load_defaults() == {"b.op": {"cpu": "jax_raw"}}
    assert td.clear_defaults("b.op") == ["b.op"]  # a single name is accepted
    td.save_defaults({"c.op": {"cpu": "numba"}})
    assert td.clear_defaults() == ["c.op"]
    assert td.load_defaults() == {}


@pytest.mark.parametrize(
    "bad, match",
    [
        ([("a", "b")], r"expected a mapping \{primitive: \{platform: backend\}\}"),
        ({"a.op": "numba"}, r"entry 'a.op': 'numba' is not \{platform: backend\}"),
        ({"a.op": {"cpu": 3}}, r"entry 'a.op': \{'cpu': 3\} is not"),
    ],
)
def test_save_rejects_malformed_mappings(cfg, bad, match):
    with pytest.raises(TypeError, match=match):
        td.save_defaults(bad)
    assert not cfg.exists()


def _reads_as_empty_with_warning(cfg, text: str, match: str) -> None:
    """A defaults file holding ``text`` loads as no defaults, with a warning."""
    cfg.mkdir()
    (cfg / "defaults.json").write_text(text)
    with pytest.warns(PolykernelWarning, match=match):
        assert td.load_defaults() == {}


def test_invalid_json_reads_as_empty_with_warning(cfg):
    _reads_as_empty_with_warning(
        cfg, "{not json", r"defaults.json: not valid JSON .*polykernel defaults clear"
    )


def test_wrong_shape_reads_as_empty_with_warning_and_bad_entries_dropped(cfg):
    _reads_as_empty_with_warning(
        cfg,
        "[1, 2]",
        r"expected a JSON object mapping "
        r"primitive name to \{platform: backend\}, got list",
    )
    (cfg / "defaults.json").write_text(
        json.dumps({"ok.op": {"cpu": "numba", "gpu": 1}, "bad.op": 5})
    )
    assert td.load_defaults() == {"ok.op": {"cpu": "numba"}}


def test_unreadable_file_warns(cfg):
    (cfg / "defaults.json").mkdir(parents=True)  # a directory where the file goes
    with pytest.warns(
        PolykernelWarning,
        match=r"cannot read tuned defaults .*"
        r"using the built-in defaults",
    ):
        assert td.load_defaults() == {}
