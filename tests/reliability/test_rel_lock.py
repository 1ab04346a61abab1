"""The tuned table under concurrent writers: two processes lose nothing.

Each process records its own saved defaults one ``record_entries`` call at a time
(a read-modify-write of the whole file) while the other does the same; without the
cross-process lock one writer's read misses the other's latest write and entries
vanish. Both also clear some of their own entries, the other read-modify-write.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

_WRITER = """
import os, sys, time
from polykernel.dispatch import Choice, Entry, Key, Scope
from polykernel.dispatch.writing import clear_entries, record_entries
who, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.001)
for i in range(n):
    record_entries([
        Entry(Key(f"{who}.op{i}", p, "d", "f", "*", None), Scope.SAVED, Choice(b),
              kernels=((b, "identity"),))
        for p, b in (("cpu", "numba"), ("gpu", who))
    ])
clear_entries([f"{who}.op{i}" for i in range(0, n, 10)])
print("done")
"""


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_two_writer_processes_lose_no_entry(tmp_path, run_env):
    env = dict(run_env, POLYKERNEL_CONFIG_DIR=str(tmp_path / "config"))
    go, n = tmp_path / "go", 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, who, str(n), str(go)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for who in ("a", "b")
    ]
    time.sleep(1.0)  # both are waiting on the start line
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0 and "done" in out, err
    data = json.loads((tmp_path / "config" / "tuned.json").read_text())["entries"]
    got = {
        name: {e["platform"]: e["winner"]["backend"] for e in entries}
        for name, entries in data.items()
    }
    expected = {
        f"{who}.op{i}": {"cpu": "numba", "gpu": who}
        for who in ("a", "b")
        for i in range(n)
        if i % 10
    }
    assert got == expected
    # nothing but the file itself is left behind (no temporary files, no lock file)
    assert os.listdir(tmp_path / "config") == ["tuned.json"]
