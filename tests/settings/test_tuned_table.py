"""The tuned table file: round trip, replacement by key, clear, export, and two
processes writing at once (nothing lost: the same lock as ``defaults.json``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

import polykernel as pk
from polykernel.settings import tuned_table
from polykernel.settings.tuned_table import Choice, Key, TunedEntry

pytest_plugins = ("plugin_support",)  # the distribution fixture


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))


def _entry(
    name: str, bucket: int, backend: str = "numba", median: float = 1e-5
) -> TunedEntry:
    key = Key(
        name, "cpu", "cpu model (2 cores)", "x86_64-avx2", '{"in": []}', (bucket,)
    )
    best = Choice(backend, (("parallel", True),), median, 0.02)
    return TunedEntry(
        key,
        best,
        {backend: best},
        ({"backend": backend},),
        {"shape": [[2**bucket]], "date": "2026-11-26"},
    )


def test_nothing_is_created_until_the_first_write():
    assert not tuned_table.tuned_path().exists()
    assert tuned_table.entries_for("table.none") == []
    assert tuned_table.clear_entries() == []
    assert not tuned_table.tuned_path().parent.exists()


def test_entries_round_trip_and_a_key_is_replaced_not_duplicated():
    tuned_table.record_entries([_entry("table.a", 10), _entry("table.a", 12)])
    tuned_table.record_entries([_entry("table.a", 10, backend="cuda_raw")])
    got = {e.key.bucket: e.best.backend for e in tuned_table.entries_for("table.a")}
    assert got == {(10,): "cuda_raw", (12,): "numba"}
    raw = json.loads(tuned_table.tuned_path().read_text())
    assert (raw["format"], raw["version"]) == ("polykernel.tuned", 1)
    (first,) = [e for e in tuned_table.entries_for("table.a") if e.key.bucket == (12,)]
    assert dict(first.best.params) == {"parallel": True}
    assert first.recorded["shape"] == [[4096]]
    assert tuned_table.user_primitives() == ["table.a"]


def test_clear_and_export(tmp_path):
    tuned_table.record_entries([_entry("table.b", 3), _entry("table.c", 4)])
    shipped = tmp_path / "ship" / "tuned.json"
    assert tuned_table.export_entries(shipped, ["table.b"]) == 1
    assert list(json.loads(shipped.read_text())["entries"]) == ["table.b"]
    assert tuned_table.clear_entries(["table.b", "table.nope"]) == ["table.b"]
    assert tuned_table.user_primitives() == ["table.c"]
    assert tuned_table.clear_entries() == ["table.c"]
    # The exported table is a table a library can ship.
    tuned_table.register_shipped(shipped, "table.b")
    assert [e.key.bucket for e in tuned_table.entries_for("table.b")] == [(3,)]


def test_a_shipped_table_must_be_a_path():
    with pytest.raises(pk.KernelTypeError, match=r"a shipped table is a path"):
        tuned_table.register_shipped(42)  # type: ignore[arg-type]


WRITER = textwrap.dedent(
    """
    import sys
    from polykernel.settings import tuned_table
    from polykernel.settings.tuned_table import Choice, Key, TunedEntry
    tag = sys.argv[1]
    for i in range(25):
        key = Key("table.race", "cpu", "d", "f", tag, (i,))
        best = Choice("numba", (), 1e-5)
        tuned_table.record_entries([TunedEntry(key, best, {"numba": best})])
    """
)


@pytest.mark.slow
def test_two_processes_recording_at_once_lose_nothing(run_env, tmp_path):
    env = {**run_env, "POLYKERNEL_CONFIG_DIR": str(tmp_path / "config")}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, tag], env=env)
        for tag in ("p", "q")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    entries = tuned_table.entries_for("table.race")
    assert sorted((e.key.signature, e.key.bucket[0]) for e in entries) == sorted(
        (tag, i) for tag in ("p", "q") for i in range(25)
    )


ENTRY_POINT_READER = textwrap.dedent(
    """
    import warnings
    from polykernel.settings import tuned_table
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        entries = tuned_table.entries_for("table.ep")
        again = tuned_table.entries_for("table.ep")  # the group is read once
    print([e.key.bucket for e in entries], len(again))
    for w in caught:
        print(type(w.message).__name__, w.message)
    """
)


def test_a_table_shipped_through_an_entry_point_is_found_and_a_broken_one_warns(
    run_env, tmp_path, distribution
):
    """An installed distribution declares its table in ``polykernel.tuned_tables``
    (a callable returning the path); a broken entry point beside it is skipped
    with one warning naming it, and the good one still counts."""
    tuned_table.record_entries([_entry("table.ep", 5)])
    table = tmp_path / "lib" / "tuned.json"
    assert tuned_table.export_entries(table, ["table.ep"]) == 1
    tuned_table.clear_entries()
    site = distribution(
        tmp_path / "site",
        ["broken = pk_no_such_module:table", "mylib = pk_lib_tables:table"],
        [],
        group=tuned_table.ENTRY_POINT_GROUP,
    )
    (site / "pk_lib_tables.py").write_text(f"def table():\n    return {str(table)!r}\n")
    env = {**run_env, "POLYKERNEL_CONFIG_DIR": str(tmp_path / "config"),
           "PYTHONPATH": str(site)}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", ENTRY_POINT_READER], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[(5,)] 1"
    assert lines[1:] == [
        "TuningWarning polykernel: the tuned-table entry point 'broken' "
        "(pk_no_such_module:table) is skipped: ModuleNotFoundError: No module named "
        "'pk_no_such_module'."
    ]
