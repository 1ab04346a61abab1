"""The one table of measured choices: round trip, replacement by key, clear and
export, shipped tables (registered or through an entry point), two processes
writing at once, entries it cannot read kept, and version-1 tables."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import json
import os
import re
import stat
import subprocess
import sys
import textwrap
import types
import warnings

import jax
import jax.numpy as jnp
import pytest
from dispatch_support import N, entry, make, spec

import polykernel as pk
from polykernel.cli.main import main
from polykernel.dispatch import table, writing
from polykernel.dispatch.records import Scope

FORMAT = {"format": "polykernel.tuned", "version": 2}


@pytest.fixture(autouse=True)
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path / "config"


@pytest.fixture
def shipped(monkeypatch):
    """The shipped tables registered here are forgotten after the test (the
    catalog's, which ``tune --show`` imports, are registered for good first)."""
    importlib.import_module("polykernel.catalog")
    monkeypatch.setattr(table, "_shipped", list(table._shipped))


def test_nothing_is_created_until_the_first_write(config):
    assert not table.tuned_path().exists()
    assert table.entries_for("dispatch.table.none") == []
    assert writing.clear_entries() == []
    assert writing.check_writable() == config / "tuned.json"
    assert not config.exists()


def test_entries_round_trip_and_a_key_is_replaced_not_duplicated(config):
    op = make("dispatch.table.round_trip")
    ratios = {("jax_raw", None): 1.3, ("numba", 4): 1.0, ("numba", 2): 1.1}
    first = [entry(op, (10,), "numba", {"block": 4}, ratios=ratios),
             entry(op, (12,), "numba", {"block": 2})]  # fmt: skip
    writing.record_entries(first)
    source = str(table.tuned_path())
    assert table.entries_for(op.name) == [
        dataclasses.replace(e, source=source) for e in first
    ]
    writing.record_entries([entry(op, (10,), "jax_raw", {})])
    saved = entry(op, None, "numba", {"block": 1}, scope=Scope.SAVED)
    writing.record_entries([saved])  # same device, another scope: kept apart
    got = {(e.scope, e.key.bucket): e.winner.label for e in table.entries_for(op.name)}
    assert got == {
        (Scope.TUNED, (10,)): "jax_raw",
        (Scope.TUNED, (12,)): "numba(block=2)",
        (Scope.SAVED, None): "numba(block=1)",
    }
    raw = json.loads(table.tuned_path().read_text())
    assert (raw["format"], raw["version"]) == ("polykernel.tuned", 2)
    # Made owner-only; written atomically: only the table, no temporary, no lock.
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    assert os.listdir(config) == ["tuned.json"]
    assert len(raw["entries"][op.name]) == 3
    assert op.name in table.known_primitives()


def test_clear_by_name_and_scope_then_export_a_shippable_table(tmp_path, shipped):
    b, c = make("dispatch.table.b"), make("dispatch.table.c")
    writing.record_entries([
        entry(b, (3,), "numba", {"block": 2}),
        entry(c, (4,), "numba", {"block": 2}),
        entry(c, None, "numba", {"block": 4}, scope=Scope.SAVED),
    ])  # fmt: skip
    target = tmp_path / "ship" / "tuned.json"
    assert writing.export_entries(target, [b.name]) == 1
    assert list(json.loads(target.read_text())["entries"]) == [b.name]
    assert writing.clear_entries([b.name, "dispatch.table.nope"]) == [b.name]
    assert writing.clear_entries(scope=Scope.SAVED) == [c.name]
    assert [e.scope for e in table.entries_for(c.name)] == [Scope.TUNED]
    assert writing.clear_entries() == [c.name]
    assert not {b.name, c.name} & set(table.known_primitives())
    # The exported table is one a library can ship: used, below the user's own.
    b.def_tuned_table(target)
    (found,) = table.entries_for(b.name)
    assert (found.key.bucket, found.source) == ((3,), str(target))
    writing.record_entries([entry(b, (3,), "jax_raw", {})])
    assert [e.winner.backend for e in table.entries_for(b.name)] == ["jax_raw"]


def test_export_refuses_an_unreadable_table_and_an_unwritable_target(tmp_path):
    table.tuned_path().parent.mkdir(mode=0o700)
    table.tuned_path().write_text("{oops")
    with (
        pytest.warns(pk.TuningWarning, match=r"it is not valid JSON"),
        pytest.raises(
            pk.TuningError,
            match=r"polykernel tune --export: your table .*tuned.json cannot be "
            r"read: it is not valid JSON",
        ),
    ):
        writing.export_entries(tmp_path / "out.json")
    table.tuned_path().unlink()
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(pk.TuningError, match=r"cannot write .*dir.json \(it is a "):
        writing.export_entries(tmp_path / "dir.json")


def test_a_shipped_table_must_be_a_path():
    with pytest.raises(
        pk.KernelTypeError,
        match=r"polykernel tuned tables: a shipped table is a path \(str or "
        r"os.PathLike\), got int: 42\.",
    ):
        table.register_shipped(42)  # type: ignore[arg-type]


def test_a_shipped_table_parses_each_primitive_when_it_is_first_asked_for(
    tmp_path, shipped, monkeypatch
):
    used, broken = make("dispatch.table.used"), make("dispatch.table.broken")
    good = entry(used, (N,), "numba", {"block": 4}).to_json()
    ship = tmp_path / "ship.json"
    ship.write_text(json.dumps({**FORMAT, "entries": {
        used.name: [good],
        broken.name: [entry(broken, (N,), "numba", {"block": 4}).to_json(),
                      {**entry(broken, (N,), "numba", {}).to_json(), "bucket": "x"}],
    }}))  # fmt: skip
    used.def_tuned_table(ship)
    broken.def_tuned_table(ship)
    parsed: list[str] = []
    real = table.Entry.from_json

    def counting(primitive, raw, source):
        parsed.append(primitive)
        return real(primitive, raw, source)

    monkeypatch.setattr(table.Entry, "from_json", staticmethod(counting))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the broken primitive's entry is not read
        d = used.dispatch(spec(), outs=spec(), platform="cpu")
    assert d.entry is not None and d.params == {"block": 4}
    assert parsed == [used.name]
    entries = table.read_table(ship).entries
    assert set(entries) == {used.name, broken.name} and broken.name in entries
    assert parsed == [used.name]  # naming the primitives parses none
    with pytest.warns(pk.TuningWarning, match=re.escape(
            f"polykernel tuned table {ship}: 1 malformed entry skipped (first: "
            f"{broken.name}: bucket must be a list of ints); its other entries "
            f"are used")):  # fmt: skip
        d = broken.dispatch(spec(), outs=spec(), platform="cpu")
    assert d.entry is not None and d.params == {"block": 4}
    assert parsed == [used.name, broken.name, broken.name]
    used.dispatch(spec(), outs=spec(), platform="cpu")
    broken.dispatch(spec(), outs=spec(), platform="cpu")
    assert len(parsed) == 3  # each primitive parsed once


def test_tune_show_lists_user_and_shipped_entries_fresh_or_stale(
    tmp_path, shipped, capsys
):
    op = make("dispatch.table.show")
    writing.record_entries([entry(op, (12,), "numba", {"block": 2})])
    writing.export_entries(tmp_path / "ship.json")
    writing.clear_entries()
    writing.record_entries([entry(op, (10,), "numba", {"block": 4}, fresh=False)])
    op.def_tuned_table(tmp_path / "ship.json")
    assert main(["tune", "--show", op.name]) == 0
    out = capsys.readouterr().out
    assert f"shipped table:    {tmp_path / 'ship.json'}" in out
    assert f"{op.name}: 2 entries" in out
    assert "cpu bucket [10] (tuned): numba(block=4)" in out
    assert "STALE: it did not record the kernels it measured" in out
    assert "cpu bucket [12] (tuned): numba(block=2)" in out and "; fresh" in out
    assert out.rstrip().endswith("2 entries")


def test_a_table_shipped_through_an_entry_point_is_found_and_a_broken_one_warns(
    tmp_path, monkeypatch, shipped
):
    """A distribution declares its table in ``polykernel.tuned_tables`` (a path,
    or a function returning one); a broken entry point beside it is skipped with
    one warning naming it, and the good one still counts."""
    op = make("dispatch.table.entry_point")
    writing.record_entries([entry(op, (5,), "numba", {"block": 2})])
    path = tmp_path / "lib" / "tuned.json"
    assert writing.export_entries(path, [op.name]) == 1
    writing.clear_entries()
    library = types.ModuleType("pk_lib_tables")
    library.table = lambda: path  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pk_lib_tables", library)
    points = importlib.metadata.EntryPoints(
        importlib.metadata.EntryPoint(name, value, group=table.ENTRY_POINT_GROUP)
        for name, value in (("broken", "pk_no_such_module:table"),
                            ("mylib", "pk_lib_tables:table"))
    )  # fmt: skip
    real = importlib.metadata.entry_points

    def fake(**selection):
        if selection.get("group") == table.ENTRY_POINT_GROUP:
            return points
        return real(**selection)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    monkeypatch.setattr(table, "_entry_points_read", False)
    with pytest.warns(
        pk.TuningWarning,
        match=r"^polykernel: the tuned-table entry point 'broken' "
        r"\(pk_no_such_module:table\) is skipped: ModuleNotFoundError: No module "
        r"named 'pk_no_such_module'\.$",
    ):
        assert [e.key.bucket for e in table.entries_for(op.name)] == [(5,)]
    assert len(table.entries_for(op.name)) == 1  # the group is read once


WRITER = textwrap.dedent(
    """
    import sys
    from polykernel.dispatch import Choice, Entry, Key, Scope
    from polykernel.dispatch.writing import record_entries
    tag = sys.argv[1]
    for i in range(25):
        key = Key("dispatch.table.race", "cpu", "d", "f", tag, (i,))
        made = Entry(key, Scope.TUNED, Choice("numba"), kernels=(("a", "b"),))
        record_entries([made])
    """
)


@pytest.mark.slow  # two processes importing polykernel
def test_two_processes_recording_at_once_lose_nothing(run_env, config):
    env = {**run_env, "POLYKERNEL_CONFIG_DIR": str(config)}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, tag], env=env)
        for tag in ("p", "q")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    found = table.entries_for("dispatch.table.race")
    assert sorted((e.key.signature, e.key.bucket[0]) for e in found) == sorted(
        (tag, i) for tag in ("p", "q") for i in range(25)
    )


# -- what a save keeps -----------------------------------------------------------------
def _fresh(op) -> dict:
    return entry(op, (10,), "numba", {"block": 4}).to_json()


def _junk(op, **changes) -> dict:
    return {**_fresh(op), "bucket": [12], **changes}


def test_entries_the_reader_cannot_parse_are_kept_verbatim_by_a_save(config):
    op = make("dispatch.table.keep")
    odd = [
        {**_junk(op), "candidates": "junk", "future_field": [1, {"x": None}]},
        "not even an object",
    ]
    config.mkdir(mode=0o700)
    path = config / "tuned.json"
    path.write_text(json.dumps({**FORMAT, "entries": {op.name: odd, "x.y": [7]}}))
    writing.record_entries([entry(op, (10,), "numba", {"block": 4})])
    saved = json.loads(path.read_text())["entries"]
    assert saved["x.y"] == [7] and saved[op.name][:2] == odd
    assert saved[op.name][2]["winner"]["params"] == {"block": 4}
    assert writing.clear_entries(scope=Scope.SAVED) == []  # none of that scope
    assert json.loads(path.read_text())["entries"] == saved


def _version_1(op) -> dict:
    """An entry as polykernel 0.1 wrote it: ``best``, ``per_backend``, no kernels,
    tuples as lists, a candidate the budget cut."""
    fresh = _fresh(op)
    keys = ("platform", "device", "family", "signature", "bucket")
    best = {"backend": "numba", "params": {"block": 4}, "median_s": 1e-5, "spread": 0.1}
    return {
        **{k: fresh[k] for k in keys},
        "best": best,
        "per_backend": {"numba": best},
        "candidates": [
            {
                "backend": "numba",
                "params": {"block": 4},
                "status": "ok",
                "median_s": 1e-5,
                "spread": 0.1,
                "ratio": 1.0,
                "ratio_spread": 0.0,
                "chosen": True,
                "detail": "",
            },
            {
                "backend": "numba",
                "params": {"block": [1, 2]},
                "status": "cut",
                "median_s": None,
                "spread": None,
                "ratio": None,
                "detail": "cut",
            },
        ],
        "recorded": {"shape": [[N]], "date": "2026-11-01T00:00:00+00:00"},
    }


def test_a_version_1_table_is_stale_and_a_save_converts_it_keeping_it(config):
    seen: list = []
    op = make("dispatch.table.version_1", seen)
    old = _version_1(op)
    config.mkdir(mode=0o700)
    path = config / "tuned.json"
    path.write_text(json.dumps({"format": "polykernel.tuned", "version": 1,
                                "entries": {op.name: [old]}}))  # fmt: skip
    decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert decision.reason == "default"
    ((stale, why),) = decision.stale
    assert stale.winner.label == "numba(block=4)" and stale.kernels == ()
    assert why == "it did not record the kernels it measured (an older table)"
    x = jnp.ones(N, jnp.float32)
    assert float(jax.jit(lambda v: op(v, outs=spec()))(x)[0]) == 2.0
    assert seen[-1] == ("jax_raw", None)  # reported, never used
    writing.record_entries([entry(op, (12,), "numba", {"block": 2})])
    saved = json.loads(path.read_text())
    assert (saved["format"], saved["version"]) == ("polykernel.tuned", 2)
    assert saved["entries"][op.name][0] == old
    got = {e.key.bucket: bool(e.kernels) for e in table.entries_for(op.name)}
    assert got == {(10,): False, (12,): True}
    # A fresh entry of the old one's key replaces it.
    writing.record_entries([entry(op, (10,), "numba", {"block": 1})])
    assert len(json.loads(path.read_text())["entries"][op.name]) == 2
    decision = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (decision.reason, decision.params, decision.stale) == (
        "exact", {"block": 1}, ()
    )  # fmt: skip
