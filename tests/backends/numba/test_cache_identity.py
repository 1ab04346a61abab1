"""The Numba handler cache never serves another kernel's code, in any process.

Every scenario runs real processes sharing one ``POLYKERNEL_CACHE_DIR``: a cached
artefact is only correct if a *later* process, which compiled other kernels first
(and so handed out the same per-process Numba symbol names), still gets the code
the artefact was built from (numba/numba#10486 is the mechanism that broke it).
The child script is ``numba_cache_child.py``; each variant defines a kernel named
``k``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from subprocess_support import SUPPORT

CHILD = SUPPORT / "numba_cache_child.py"
X = [0.0, 1.0, 2.0, 3.0]


def expect(variant: str) -> list[float]:
    tag, arg = variant[0], variant[1:]
    rule = {
        "A": lambda v: v + 1,
        "B": lambda v: v * 10,
        "C": lambda v: v + float(arg),
        "G": lambda v: v * float(arg),
        "H": lambda v: v + float(arg),
        "F": lambda v: v * 2,
        "N": lambda v: v * 3,
        "K": lambda v: v - 1,
        "D": lambda v: v * 4,
        "X": lambda v: abs(v - 10),
    }[tag]
    return [rule(v) for v in X]


RAISED = "the kernel raised ValueError: ('bad value', 3, 3.0)"


def _start(env: dict, *variants: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *variants],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> dict[str, dict]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{err[-3000:]}"
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    for row in rows:
        if row["variant"] == "R":
            assert RAISED in row["error"], row
        else:
            assert row["out"] == expect(row["variant"]), row
    return {r["variant"]: r for r in rows}


def _child(env: dict, *variants: str) -> dict[str, str]:
    """Run the variants in a fresh process; check every result; return origins."""
    rows = _finish(_start(env, *variants))
    assert list(rows) == list(variants)
    return {v: r["origin"] for v, r in rows.items()}


def _env(run_env: dict, tmp_path: Path) -> dict:
    return dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))


def _entries(tmp_path: Path) -> list[Path]:
    root = tmp_path / "pk" / "numba"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "meta.json").is_file())


def _disk(tmp_path: Path) -> tuple[int, int]:
    files = [p for p in (tmp_path / "pk").rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_same_named_kernels_in_both_orders(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    assert _child(env, "B") == {"B": "built"}
    # the issue's reproduction: this B printed A's results
    assert _child(env, "A", "B") == {"A": "built", "B": "disk"}
    assert _child(env, "B", "A") == {"B": "disk", "A": "disk"}


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_kernels_differing_only_in_a_closure_constant(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    assert _child(env, "C3") == {"C3": "built"}
    assert _child(env, "C4", "C3") == {"C4": "built", "C3": "disk"}
    assert len(_entries(tmp_path)) == 2


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_kernels_differing_only_in_a_global_or_a_helper(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    assert _child(env, "G5", "H1") == {"G5": "built", "H1": "built"}
    # same kernel code, another global value / another global helper function
    assert _child(env, "G7", "H2") == {"G7": "built", "H2": "built"}
    assert _child(env, "H2", "G5", "H1", "G7") == dict.fromkeys(
        ("H2", "G5", "H1", "G7"), "disk"
    )


@pytest.mark.slow
def test_many_kernels_in_one_process(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    variants = [f"C{n}" for n in range(12)]
    assert set(_child(env, *variants).values()) == {"built"}
    assert set(_child(env, "A", *reversed(variants)).values()) == {"built", "disk"}
    assert len(_entries(tmp_path)) == 13


@pytest.mark.slow
def test_concurrent_processes_build_each_kernel_once(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    jobs = [("A", "B"), ("B", "A"), ("A", "C5"), ("C5", "B")]
    procs = [_start(env, *job) for job in jobs]
    built: dict[str, int] = {}
    for proc in procs:
        for variant, row in _finish(proc).items():
            built[variant] = built.get(variant, 0) + (row["origin"] == "built")
    assert built == {"A": 1, "B": 1, "C5": 1}
    assert len(_entries(tmp_path)) == 3


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_another_hash_seed_adds_nothing(run_env, tmp_path):
    # fastmath given as a set: its repr (and so a naive key) follows the hash seed
    env = _env(run_env, tmp_path)
    assert _child(dict(env, PYTHONHASHSEED="1"), "F") == {"F": "built"}
    before = _disk(tmp_path)
    assert _child(dict(env, PYTHONHASHSEED="2"), "F") == {"F": "disk"}
    assert _disk(tmp_path) == before


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_corrupt_or_truncated_entry_is_rebuilt(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    assert _child(env, "A") == {"A": "built"}
    (entry,) = _entries(tmp_path)
    obj = entry / "handler.so"
    data = obj.read_bytes()
    obj.write_bytes(data[: len(data) // 2])  # truncated
    assert _child(env, "A") == {"A": "built"}
    obj.write_bytes(bytes(b ^ 0xFF for b in obj.read_bytes()))  # same size, garbage
    assert _child(env, "A") == {"A": "built"}
    (entry / "meta.json").write_text("{not json")
    assert _child(env, "A") == {"A": "built"}
    assert _child(env, "A") == {"A": "disk"}
    assert obj.read_bytes() == data


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_kernels_reading_a_numba_environment_are_cached(run_env, tmp_path):
    # np.empty checks its shape, and R raises with run-time values: both box
    # values through a Numba environment, which the loader provides afresh
    env = _env(run_env, tmp_path)
    assert _child(env, "N", "R") == {"N": "built", "R": "built"}
    assert _child(env, "R", "N") == {"R": "disk", "N": "disk"}
    metas = [json.loads((e / "meta.json").read_text()) for e in _entries(tmp_path)]
    assert all(m["environments"] for m in metas)


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_uncacheable_kernel_runs_and_writes_nothing(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    assert _child(env, "X") == {"X": "uncached"}
    assert _child(env, "X", "A") == {"X": "uncached", "A": "built"}
    (entry,) = _entries(tmp_path)  # only A's
    assert json.loads((entry / "meta.json").read_text())["label"] == "make.<locals>.k"
    assert os.stat(entry).st_mode & 0o077 == 0


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_numba_own_disk_cache_is_never_built_upon(run_env, tmp_path):
    numba_cache = tmp_path / "numba"
    env = dict(_env(run_env, tmp_path), NUMBA_CACHE_DIR=str(numba_cache))
    assert _child(env, "K", "D") == {"K": "built", "D": "built"}
    assert any(numba_cache.rglob("*.nbi"))  # Numba cached the helper
    # a fresh polykernel cache, Numba's own one full: a cache=True kernel is
    # compiled afresh (and cached by us); a kernel whose helper Numba loads
    # from its cache runs, but is not cached
    env["POLYKERNEL_CACHE_DIR"] = str(tmp_path / "pk2")
    assert _child(env, "D", "K") == {"D": "uncached", "K": "built"}
