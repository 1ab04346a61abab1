"""Tables from many machines: ``polykernel tune --merge`` keeps every entry with
its provenance, flags conflicting winners, and the job's union keeps the first
table's entry for each case."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import zygote

from polykernel.dispatch.merge import case_of, merge_tables, union
from polykernel.dispatch.table import read_table

REPO = Path(__file__).resolve().parents[2]
NAME = "polykernel.catalog.scaled_add"
SHIPPED = json.loads((REPO / "src/polykernel/catalog/tuned/cpu.json").read_text())


def _entries(winner: dict | None = None, bucket: list[int] | None = None) -> list:
    entry = dict(SHIPPED["entries"][NAME][0])
    entry["recorded"] = {**entry.get("recorded", {}), "machine": "host-a"}
    if winner is not None:
        entry["winner"] = winner
    if bucket is not None:
        entry["bucket"] = bucket
    return [entry]


def _table(path: Path, entries: dict) -> Path:
    path.write_text(json.dumps({"format": "polykernel.tuned", "version": 2,
                                "entries": entries}))  # fmt: skip
    return path


JAX_RAW = {"backend": "jax_raw", "params": {}}


def test_merge_keeps_every_entry_and_flags_conflicting_winners(tmp_path: Path):
    a = _table(tmp_path / "a.json", {NAME: _entries()})
    b = _table(tmp_path / "b.json", {NAME: _entries(JAX_RAW) + _entries(None, [3, 3])})
    merged = merge_tables([a, b])
    assert merged.entries == 3
    kept = merged.document["entries"][NAME]
    assert [e["bucket"] for e in kept] == [[10, 10], [3, 3]]
    assert kept[0]["winner"] == SHIPPED["entries"][NAME][0]["winner"]  # a's first
    assert [e["recorded"]["table"] for e in kept] == [str(a), str(b)]
    assert kept[0]["recorded"]["machine"] == "host-a"  # provenance kept
    (aside,) = merged.document["others"]  # b's entry for the same case: not lost
    assert aside["entry"]["winner"] == JAX_RAW and aside["table"] == str(b)
    (conflict,) = merged.conflicts
    assert conflict.line().startswith(f"{NAME}: cpu Intel")
    assert "kept numba(parallel=False) from" in conflict.line()
    assert f"jax_raw in {b}" in conflict.line()


def test_merged_table_reads_back_and_a_merge_of_merges_loses_nothing(tmp_path: Path):
    a = _table(tmp_path / "a.json", {NAME: _entries()})
    b = _table(tmp_path / "b.json", {NAME: _entries(JAX_RAW)})
    first = tmp_path / "ab.json"
    first.write_text(json.dumps(merge_tables([a, b]).document))
    assert len(read_table(first).entries[NAME]) == 1
    again = merge_tables([first, a])
    assert len(again.document["others"]) == 2  # b's (kept before) and a's again


def test_merge_refuses_what_is_not_a_table(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match=r"bad.json: it is not a polykernel tuned"):
        merge_tables([bad])
    with pytest.raises(ValueError, match=r"missing.json: no such file"):
        merge_tables([tmp_path / "missing.json"])


def test_union_takes_the_first_tables_entry_per_case():
    first, second = _entries(), _entries(JAX_RAW)
    merged = union([{NAME: first}, {NAME: second + _entries(None, [1, 1])}])
    assert merged[NAME][0]["winner"] == first[0]["winner"]
    assert len(merged[NAME]) == 2
    assert case_of(NAME, first[0]) == case_of(NAME, second[0])
    assert case_of(NAME, {"junk": 1}).startswith("unparsed:")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # A child of the test process's zygote: as `python -m polykernel` runs.
    argv = ["-m", "polykernel", "tune", *args]
    return zygote.run(argv, env=dict(os.environ), cwd=cwd)


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_cli_merge_writes_the_table_and_lists_conflicts(tmp_path: Path):
    a = _table(tmp_path / "a.json", {NAME: _entries()})
    b = _table(tmp_path / "b.json", {NAME: _entries(JAX_RAW)})
    out = tmp_path / "out" / "merged.json"
    done = _cli("--merge", str(a), str(b), "-o", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "merged 2 tables: 2 entries -> 1 in use, 1 kept aside" in done.stdout
    assert "conflict: polykernel.catalog.scaled_add: cpu" in done.stdout
    assert json.loads(out.read_text())["others"]
    strict = _cli("--merge", str(a), str(b), "-o", str(out), "--strict", cwd=tmp_path)
    assert strict.returncode == 1
    usage = _cli("--merge", str(a), cwd=tmp_path)
    assert usage.returncode == 2 and "--merge needs -o OUT" in usage.stderr
    same = _cli("--merge", str(a), "-o", str(a), cwd=tmp_path)
    assert same.returncode == 2 and "is one of the tables merged" in same.stderr


def test_cli_distributed_options_go_together(tmp_path: Path):
    done = _cli("polykernel.catalog", "--coordinator", "127.0.0.1:1", cwd=tmp_path)
    assert done.returncode == 2
    assert "--coordinator, --num-processes and --process-id go together" in done.stderr
