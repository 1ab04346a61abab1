"""The Numba handler cache never serves another kernel's code, in any process.

Every scenario runs real processes sharing one ``POLYKERNEL_CACHE_DIR``: a cached
artefact is only correct if a *later* process, which compiled other kernels first
(and so handed out the same per-process Numba symbol names), still gets the code
the artefact was built from (numba/numba#10486 is the mechanism that broke it).
The child script is ``numba_cache_child.py``; each variant defines a kernel named
``k``.

A fresh process costs about 1.5 CPU-seconds before its first kernel (imports, and
Numba's first compile), so scenarios that need the same kind of process run side
by side in one (each with kernels of its own, in one cache): :data:`ROUNDS` lists
those processes, run once for the module by the fixture ``rounds``. Each round is
still a new process, with a hash seed of its own, that only finds what the earlier
ones left on disk, and each row says which Numba uid its kernel took, so the tests
check that a later process really handed a kernel the names an earlier process
gave another.

The rounds are fresh interpreters (a zygote's children share its hash seed), and
so are the processes that must run at once; the two processes of
``test_many_kernels_in_one_process`` are children of the test's jax zygote, which
has not imported Numba: each starts with Numba's uids and dispatchers empty.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import zygote
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

Rows = dict[str, dict]  # variant -> its child's line (out, origin, target, uid)


def _start(env: dict, *variants: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(CHILD), *variants],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> Rows:
    out, err = proc.communicate(timeout=300)
    return _checked(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))


def _checked(proc: subprocess.CompletedProcess) -> Rows:
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    for row in rows:
        if row["variant"] == "R":
            assert RAISED in row["error"], row
        else:
            assert row["out"] == expect(row["variant"]), row
    return {r["variant"]: r for r in rows}


def _run(env: dict, *variants: str, forked: bool = False) -> Rows:
    """Run the variants in a fresh process (``forked``: a child of the test's jax
    zygote, see test_many_kernels_in_one_process); check every result; return
    its rows."""
    if forked:
        rows = _checked(zygote.run([str(CHILD), *variants], env=env, timeout=300))
    else:
        rows = _finish(_start(env, *variants))
    assert list(rows) == list(variants)
    return rows


def origins(rows: Rows, *variants: str) -> dict[str, str]:
    """Where each of ``variants`` came from, in their order in ``rows``."""
    return {v: r["origin"] for v, r in rows.items() if v in variants}


def _env(run_env: dict, tmp_path: Path) -> dict:
    return dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))


def _entries(tmp_path: Path) -> list[Path]:
    root = tmp_path / "pk" / "numba"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "meta.json").is_file())


def _meta(entry: Path) -> dict:
    return json.loads((entry / "meta.json").read_text())


def _targets(tmp_path: Path) -> dict[str, Path]:
    """The cache's entries under ``tmp_path``, by the target each one holds."""
    return {_meta(entry)["entry"]: entry for entry in _entries(tmp_path)}


def _same_uid(later: dict, earlier: dict) -> None:
    """``later`` was compiled with the uid (so the symbol names) of ``earlier``,
    which an earlier process built: what made a name-keyed cache serve the wrong
    code."""
    assert later["origin"] == earlier["origin"] == "built"
    assert later["uid"] == earlier["uid"], (later, earlier)


def _files(root: Path) -> dict[str, str]:
    """Every file under ``root``, by its path there: its content's digest (a
    cache hit touches an entry's files, so their times say nothing)."""
    found = (p for p in root.rglob("*") if p.is_file())
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in found}  # fmt: skip


@dataclass
class Rounds:
    """Fresh processes, one after the other, in one cache (``root / "pk"``) and one
    Numba cache (``root / "numba"``), the n-th with ``PYTHONHASHSEED=n``."""

    root: Path
    rows: list[Rows] = field(default_factory=list)  # each process's rows
    # after each process: the target of every entry (twice if stored twice)
    stored: list[list[str]] = field(default_factory=list)
    files: list[dict] = field(default_factory=list)  # after each: `_files(root)`
    kept: dict[str, tuple[Path, bytes]] = field(default_factory=dict)  # see rounds

    def run(self, *variants: str) -> Rows:
        env = dict(
            _env(dict(os.environ), self.root),  # os.environ: what run_env gives
            NUMBA_CACHE_DIR=str(self.root / "numba"),
            PYTHONHASHSEED=str(len(self.rows) + 1),
        )
        rows = _run(env, *variants)
        self.rows.append(rows)
        self.stored.append(sorted(_meta(e)["entry"] for e in _entries(self.root)))
        self.files.append(_files(self.root))
        return rows

    def targets(self, *variants: str) -> list[str]:
        """The targets of ``variants``, each once."""
        every = [row for rows in self.rows for row in rows.values()]
        return sorted({r["target"] for r in every if r["variant"] in variants})


# -- the rounds: every scenario below but two, side by side ---------------------------
#: Same-named kernels, a later process compiling other kernels first: three
#: scenarios (their kernels are all different). In each process every scenario's
#: kernels are compiled after as many functions as in the others, so they take the
#: uids (the names) a kernel of the same scenario took in an earlier process, as
#: when each ran alone; the tests check it (`_same_uid`). They come first in each
#: round, so what the other kernels compile shifts none of their uids.
SAME_NAMES = (
    ("B", "C3", "G5", "H1"),
    ("A", "B", "C4", "C3", "G7", "H2"),
    ("B", "A", "H2", "G5", "H1", "G7"),
)


def _truncate(entry: Path) -> None:
    obj = entry / "handler.so"
    obj.write_bytes(obj.read_bytes()[: obj.stat().st_size // 2])


def _scramble(entry: Path) -> None:
    obj = entry / "handler.so"
    obj.write_bytes(bytes(b ^ 0xFF for b in obj.read_bytes()))  # same size, garbage


def _break_meta(entry: Path) -> None:
    (entry / "meta.json").write_text("{not json")


#: How `rounds` damages each of these kernels' entries after the first round.
DAMAGE = {"C1": _truncate, "C2": _scramble, "C6": _break_meta}
#: Kernels whose entries `rounds` removes after the first round (which filled
#: Numba's own cache): for them, the second is a fresh polykernel cache.
REMOVED = ("K", "D")

#: Misses, entries a later process must not load and kernels it must not store,
#: after SAME_NAMES in each round (their kernels are all different, and none
#: depends on the uids its kernels take): kernels reading a Numba environment (N,
#: R), an uncacheable one (X, then C7 after it), damaged entries (DAMAGE's), a
#: kernel whose naive key follows the hash seed (F) and ``cache=True`` kernels on
#: Numba's own cache (REMOVED's).
MISSES = (
    ("N", "R", "X", *DAMAGE, "F", "K", "D"),
    ("R", "N", "X", "C7", *DAMAGE, "F", "D", "K"),
    tuple(DAMAGE),
)
ROUNDS = tuple(a + b for a, b in zip(SAME_NAMES, MISSES, strict=True))


def _cached(upto: int) -> list[str]:
    """The variants whose entries the rounds up to ``upto`` (from 0) leave in the
    cache: all but X (uncacheable), and but D after the first (its entry removed,
    it is uncacheable in the second)."""
    variants = {v for variants in ROUNDS[: upto + 1] for v in variants} - {"X"}
    return sorted(variants - {"D"} if upto >= 1 else variants)


@pytest.fixture(scope="module")
def rounds(tmp_path_factory) -> Rounds:
    """ROUNDS's processes; between the first two, DAMAGE done to its kernels'
    entries (each library as built kept, by variant, in ``kept``) and REMOVED's
    entries removed."""
    rounds = Rounds(tmp_path_factory.mktemp("rounds"))
    first = rounds.run(*ROUNDS[0])
    entries = _targets(rounds.root)
    for variant, damage in DAMAGE.items():
        obj = entries[first[variant]["target"]] / "handler.so"
        rounds.kept[variant] = (obj, obj.read_bytes())
        damage(obj.parent)
    for variant in REMOVED:
        shutil.rmtree(entries[first[variant]["target"]])
    for variants in ROUNDS[1:]:
        rounds.run(*variants)
    return rounds


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_same_named_kernels_in_both_orders(rounds):
    first, second, third = rounds.rows
    assert origins(first, "B") == {"B": "built"}
    # the issue's reproduction: this B printed A's results
    assert origins(second, "A", "B") == {"A": "built", "B": "disk"}
    _same_uid(second["A"], first["B"])
    assert origins(third, "B", "A") == {"B": "disk", "A": "disk"}


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_kernels_differing_only_in_a_closure_constant(rounds):
    first, second, _ = rounds.rows
    assert origins(first, "C3") == {"C3": "built"}
    assert origins(second, "C4", "C3") == {"C4": "built", "C3": "disk"}
    _same_uid(second["C4"], first["C3"])
    # two entries, neither replaced by the other: one for each kernel the two
    # rounds built, and no more
    assert len(rounds.targets("C3", "C4")) == 2
    assert rounds.stored[1] == rounds.targets(*_cached(1))


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_kernels_differing_only_in_a_global_or_a_helper(rounds):
    first, second, third = rounds.rows
    assert origins(first, "G5", "H1") == {"G5": "built", "H1": "built"}
    # same kernel code, another global value / another global helper function
    assert origins(second, "G7", "H2") == {"G7": "built", "H2": "built"}
    _same_uid(second["G7"], first["G5"])
    _same_uid(second["H2"], first["H1"])
    assert origins(third, "H2", "G5", "H1", "G7") == dict.fromkeys(
        ("H2", "G5", "H1", "G7"), "disk"
    )


@pytest.mark.slow
def test_many_kernels_in_one_process(run_env, tmp_path):
    # Children of the jax zygote: it has not imported Numba, so each child's uids
    # start where a fresh process's do; no hash seed is at stake here.
    env = _env(run_env, tmp_path)
    variants = [f"C{n}" for n in range(12)]
    first = _run(env, *variants, forked=True)
    assert set(origins(first, *variants).values()) == {"built"}
    second = _run(env, "A", *reversed(variants), forked=True)
    assert set(origins(second, "A", *variants).values()) == {"built", "disk"}
    _same_uid(second["A"], first["C0"])
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
def test_another_hash_seed_adds_nothing(rounds):
    # fastmath given as a set: its repr (and so a naive key) follows the hash
    # seed, which is 1 in the first round and 2 in the second
    first, second, _ = rounds.rows
    assert origins(first, "F") == {"F": "built"}
    assert origins(second, "F") == {"F": "disk"}
    target = first["F"]["target"]
    assert second["F"]["target"] == target and rounds.stored[1].count(target) == 1
    # its entry and its lock file, as the first round left them
    name = _targets(rounds.root)[target].name

    def its(files: dict) -> dict:
        return {path: file for path, file in files.items() if name in path}

    assert its(rounds.files[1]) == its(rounds.files[0]) != {}


# -- misses: entries a later process must not load, kernels it must not store --------
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_corrupt_or_truncated_entry_is_rebuilt(rounds):
    # each kind of damage on an entry of its own: one process meets them all
    first, second, third = rounds.rows
    assert origins(first, *DAMAGE) == dict.fromkeys(DAMAGE, "built")
    assert origins(second, *DAMAGE) == dict.fromkeys(DAMAGE, "built")
    assert origins(third, *DAMAGE) == dict.fromkeys(DAMAGE, "disk")
    for variant, (obj, data) in rounds.kept.items():
        assert obj.read_bytes() == data, variant


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_kernels_reading_a_numba_environment_are_cached(rounds):
    # N's slice assignment checks shapes (in numba.np.arrayobj), and R raises
    # with run-time values: both box values through a Numba environment, which
    # the loader provides afresh
    first, second, _ = rounds.rows
    assert origins(first, "N", "R") == {"N": "built", "R": "built"}
    assert origins(second, "R", "N") == {"R": "disk", "N": "disk"}
    entries = _targets(rounds.root)
    metas = [_meta(entries[first[v]["target"]]) for v in ("N", "R")]
    assert all(m["environments"] for m in metas)


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_uncacheable_kernel_runs_and_writes_nothing(rounds):
    first, second, _ = rounds.rows
    assert origins(first, "X") == {"X": "uncached"}
    assert origins(second, "X", "C7") == {"X": "uncached", "C7": "built"}
    # after each round: the other kernels' entries, and not one more
    assert rounds.stored[0] == rounds.targets(*_cached(0))
    assert rounds.stored[1] == rounds.targets(*_cached(1))
    entry = _targets(rounds.root)[second["C7"]["target"]]
    assert _meta(entry)["label"] == "make.<locals>.k"
    assert os.stat(entry).st_mode & 0o077 == 0


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_numba_own_disk_cache_is_never_built_upon(rounds):
    first, second, _ = rounds.rows
    assert origins(first, "K", "D") == {"K": "built", "D": "built"}
    numba_cache = [path for path in rounds.files[0] if path.startswith("numba/")]
    assert any(path.endswith(".nbi") for path in numba_cache)  # Numba cached the helper
    # their entries removed (a fresh polykernel cache), Numba's own one full: a
    # cache=True kernel is compiled afresh (and cached by us); a kernel whose
    # helper Numba loads from its cache runs, but is not cached
    assert origins(second, "D", "K") == {"D": "uncached", "K": "built"}
    assert second["D"]["target"] not in rounds.stored[1]
    assert second["K"]["target"] in rounds.stored[1]
