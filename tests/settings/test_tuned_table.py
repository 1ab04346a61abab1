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
