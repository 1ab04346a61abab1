"""The cache never breaks a run: every fault is a miss, with one warning naming it.

Faults are real where they can be made here (a file in the way of the root, a
half-written or foreign entry, a racing ``prune``/``clear``, processes without
locks); the others are injected at the OS-call level (``os.mkdir``, ``os.rename``,
``fcntl.flock`` raising the ``OSError`` the kernel would): the tests run as root,
whom permission bits do not stop.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import zygote
from subprocess_support import SUPPORT, last_json, run_python

import polykernel as pk
from polykernel.backends.numba.build import loaded_handler
from polykernel.cache import admin as cache_admin, locks
from polykernel.cache.locks import (
    entry_lock,
    held_by_another,
    lock_path,
    remove_free_lock,
)
from polykernel.native import cache

CHILD = SUPPORT / "cache_stress_child.py"
SPEC = jax.ShapeDtypeStruct((3,), jnp.float32)
X = jnp.arange(3, dtype=jnp.float32)
SRC = """void inc(const pk::Tensor& x, pk::Tensor& y) {
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data_ptr<float>()[i] = x.data_ptr<float>()[i] + OFFSET;
}"""


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty private cache root, and warnings not yet given in this process."""
    root = tmp_path / "cache"
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(root))
    monkeypatch.setattr("polykernel.cache.store._warned", set())
    return root


def _load(name: str, offset: float):
    mod = pk.load_cpp_inline(name, SRC.replace("OFFSET", str(offset)), ["inc"])
    np.testing.assert_array_equal(mod.inc(X, outs=SPEC), X + offset)
    return mod


def _inject(monkeypatch, target: str, code: int, under: Path) -> None:
    """Make ``target`` (``"os.mkdir"``, ``"os.rename"``...) fail with ``code`` for
    paths under ``under``, as the kernel would."""
    module, name = target.rsplit(".", 1)
    real = getattr(__import__(module), name)

    def failing(path, *args, **kwargs):
        if str(path).startswith(str(under)):
            raise OSError(code, os.strerror(code), str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(f"{module}.{name}", failing)


@pytest.mark.parametrize(
    ("call", "code", "cause"),
    [
        ("os.mkdir", errno.EACCES, "permission denied"),
        ("os.mkdir", errno.EROFS, "read-only filesystem"),
        ("os.mkdir", errno.ENOSPC, "no space left"),
        ("os.rename", errno.ENOSPC, "no space left"),
        ("os.rename", errno.EDQUOT, "disk quota exceeded"),
    ],
)
def test_a_cache_that_cannot_be_written_is_a_miss(
    fresh_cache, monkeypatch, call, code, cause
):
    _inject(monkeypatch, call, code, fresh_cache)
    with pytest.warns(pk.CacheWarning, match=cause) as seen:
        mod = _load(f"fault_{call.replace('.', '_')}_{code}", 1.0)
    assert len(seen) == 1 and mod.built
    assert not Path(mod.library).is_relative_to(fresh_cache)  # a private build
    assert not list(fresh_cache.glob("native/*/meta.json"))


def test_one_warning_per_cause_then_log_lines(fresh_cache, monkeypatch, caplog):
    _inject(monkeypatch, "os.rename", errno.ENOSPC, fresh_cache)
    with pytest.warns(pk.CacheWarning):
        _load("fault_once_a", 2.0)
    with caplog.at_level(logging.INFO, logger="polykernel.cache.store"):
        _load("fault_once_b", 3.0)  # no second warning (filterwarnings=error)
    assert any("no space left" in r.getMessage() for r in caplog.records)


def test_a_numba_handler_runs_when_the_cache_cannot_take_it(fresh_cache, monkeypatch):
    _inject(monkeypatch, "os.rename", errno.ENOSPC, fresh_cache)

    @numba.njit
    def triple(x, out):
        for i in range(out.size):
            out[i] = 3 * x[i]

    kernel = pk.numba_kernel(triple, SPEC)
    with pytest.warns(pk.CacheWarning, match="no space left"):
        np.testing.assert_array_equal(kernel(X), 3 * X)
    (target,) = kernel._targets.values()
    assert loaded_handler(target).origin == "unpublished"
    with pytest.warns(pk.PolykernelWarning, match="could not be written"):
        pk.export(kernel)(SPEC)  # another process could not revive it


def test_the_root_being_a_file_is_a_miss_and_info_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr("polykernel.cache.store._warned", set())
    root = tmp_path / "a-file"
    root.write_text("not a directory")
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(root))
    with pytest.warns(pk.CacheWarning, match="a path of the cache is a file"):
        _load("fault_root_file", 4.0)
    info = cache_admin.info()
    assert info["exists"] is False and "is not a directory" in info["problem"]
    assert cache_admin.prune(0) == 0 and cache_admin.clear() == 0
    assert root.read_text() == "not a directory"


def test_cache_info_reports_a_bad_root_as_it_is(tmp_path, run_env):
    root = tmp_path / "a-file"
    root.write_text("")
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(root)}
    out = run_python("-m", "polykernel.cli", "cache", "info", env=env, forked=True)
    assert f"cache root   {root} (is not a directory (a file is in the way)" in out


def test_locks_that_cannot_be_taken_do_not_stop_a_build(fresh_cache, monkeypatch):
    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.warns(pk.CacheWarning, match="file locks are not available"):
        mod = _load("fault_nolock", 5.0)
    assert mod.built and Path(mod.library).is_relative_to(fresh_cache)


@pytest.mark.parametrize(
    ("damage", "cause"),
    [
        ("no-meta", "a half-written cache entry: '.*' has no meta.json"),
        ("foreign-key", "a cache entry of another key: '.*meta.json' does not record"),
        ("truncated", "a damaged cache entry: '.*lib.so' does not match its size"),
        ("not-a-record", "a damaged cache entry: '.*meta.json' is not an entry's"),
        ("intact", None),
    ],
)
def test_a_damaged_or_foreign_entry_is_a_miss_and_replaced(fresh_cache, damage, cause):
    name = f"fault_damaged_{damage.replace('-', '_')}"
    first = _load(name, 6.0)
    entry = Path(first.library).parent
    meta = json.loads((entry / "meta.json").read_text())
    if damage == "no-meta":  # a half-written entry: the library without its record
        (entry / "meta.json").unlink()
    elif damage == "foreign-key":  # another key's record
        (entry / "meta.json").write_text(json.dumps({**meta, "key": "0" * 64}))
    elif damage == "truncated":  # a new file: this process has the old one mapped
        data = (entry / "lib.so").read_bytes()
        (entry / "lib.so").unlink()
        (entry / "lib.so").write_bytes(data[:100])
    elif damage == "not-a-record":
        (entry / "meta.json").write_text("[1, 2]")
    if cause is None:
        assert cache.lookup(first.key) == entry / "lib.so"
    else:  # a miss, with one warning naming the cause (then log lines only)
        with pytest.warns(pk.CacheWarning, match=cause) as seen:
            assert cache.lookup(first.key) is None
        assert len(seen) == 1
        assert cache.lookup(first.key) is None  # no second warning
    src = SRC.replace("OFFSET", "6.0")
    again = pk.load_cpp_inline(name, src, ["inc"], force_rebuild=True)
    np.testing.assert_array_equal(again.inc(X, outs=SPEC), X + 6.0)
    assert cache.lookup(first.key) == entry / "lib.so"  # a valid entry again


def test_prune_and_clear_never_delete_an_entry_a_build_holds(fresh_cache):
    mod = _load("fault_held", 7.0)
    entry = Path(mod.library).parent
    with open(lock_path(cache.native_root(), entry.name), "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # as a builder holds it
        # Another process, as flock locks are per open file: a child of the
        # zygote (which holds none of this process's descriptors) is one, and
        # nothing here needs a fresh interpreter.
        freed = run_python("-c", "from polykernel.cache import admin as c;"
                           "print(c.prune(max_bytes=0), c.clear())",
                           env=dict(os.environ), forked=True)  # fmt: skip
        assert entry.is_dir() and (entry / "lib.so").is_file(), freed
    assert cache_admin.prune(max_bytes=0) > 0 and not entry.exists()


def test_a_lock_file_removed_while_being_taken_is_taken_again(fresh_cache, monkeypatch):
    # `clear` removes a free lock file between a builder's open() and flock(): the
    # builder must not hold the removed file (another process, or clear itself,
    # could take the new one and delete the entry it builds).
    section, key = fresh_cache / "native", "a" * 40
    path = lock_path(section, key)
    real, locked = fcntl.flock, []

    def flock_after_a_removal(fd, op):
        if not locked and not op & fcntl.LOCK_UN:
            path.unlink()  # what clear() does to a lock file nobody holds yet
        locked.append(os.fstat(fd).st_ino)
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_removal)
    with entry_lock(section, key) as held:
        assert held and len(locked) == 2  # the removed file, then the new one
        assert locked[1] == path.stat().st_ino  # holds what the path names
        monkeypatch.setattr(fcntl, "flock", real)
        assert held_by_another(section, key)
        assert not remove_free_lock(path)  # a held lock file stays
    assert remove_free_lock(path) and not path.exists()


def test_a_lock_folder_removed_while_a_lock_is_taken_is_made_again(
    fresh_cache, monkeypatch
):
    # `clear` removes the empty locks folder between a builder making it and
    # opening its lock file in it: the builder makes it again and holds its lock
    # (it used to warn "cannot take the build lock" and build unlocked).
    section, key = fresh_cache / "native", "b" * 40
    path = lock_path(section, key)
    real, removed = locks.ensure_dir, []

    def ensure_then_cleared(folder, *args, **kwargs):
        made = real(folder, *args, **kwargs)
        if len(removed) < 3:  # three clears in a row
            folder.rmdir()
            removed.append(folder)
        return made

    monkeypatch.setattr(locks, "ensure_dir", ensure_then_cleared)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CacheWarning: the lock is held
        with entry_lock(section, key) as held:
            assert held and len(removed) == 3
            assert held_by_another(section, key)
    assert path.is_file()


def test_a_lock_folder_that_keeps_disappearing_builds_unlocked(
    fresh_cache, monkeypatch
):
    real = locks.ensure_dir

    def always_cleared(folder, *args, **kwargs):
        made = real(folder, *args, **kwargs)
        folder.rmdir()
        return made

    monkeypatch.setattr(locks, "ensure_dir", always_cleared)
    warned = pytest.warns(pk.CacheWarning, match="cannot take the build lock")
    with warned, entry_lock(fresh_cache / "native", "c" * 40) as held:
        assert not held  # bounded: after that many folders, the build goes unlocked


def test_a_fresh_staging_folder_is_not_pruned(fresh_cache):
    staging = fresh_cache / "native" / (".staging-" + "a" * 40 + "-x")
    staging.mkdir(parents=True)
    (staging / "lib.so").write_bytes(b"x" * 100)
    cache_admin.prune(max_bytes=0)
    assert staging.is_dir()
    old = time.time() - 7200
    os.utime(staging / "lib.so", (old, old))
    cache_admin.prune(max_bytes=0)
    assert not staging.exists()


def _stress(env: dict, processes: int, kernels: int) -> list[dict]:
    # Processes at once, forked by the zygote (each its own process, locks and
    # file descriptors included; none pays the imports again).
    procs = [
        zygote.start([CHILD, str(kernels)], env=env, kind="full")
        for _ in range(processes)
    ]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        reports.append(last_json(out))
    return reports


@pytest.mark.slow
def test_processes_build_each_kernel_once_on_one_cache(tmp_path, run_env):
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(tmp_path / "shared")}
    reports = _stress(env, processes=4, kernels=2)
    assert all(r["ok"] for r in reports), [r["errors"] for r in reports]
    assert [sum(r["native"][i] for r in reports) for i in range(2)] == [1, 1]
    built = [sum(r["numba"][i] == "built" for r in reports) for i in range(2)]
    assert built == [1, 1]


#: What `polykernel cache prune --max-bytes 0` and `polykernel cache clear` call.
ADMIN_COMMANDS = ("prune(max_bytes=0)", "clear()")
#: One admin command back to back, in a process of its own. Until a builder makes
#: the cache root, the command returns at once (it finds no root): the loop waits
#: for the root instead of spinning on that, and races every call after it.
ADMIN_LOOP = """\
import time
from polykernel.cache import admin as cache_admin
from polykernel.settings.paths import cache_root

end = time.time() + 120
while not cache_root().is_dir() and time.time() < end:
    time.sleep(0.001)
while time.time() < end:
    cache_admin.{admin}
"""


@pytest.fixture(scope="module")
def admin_race(tmp_path_factory) -> tuple[list[dict], dict[str, bool]]:
    """Builders racing every command of ``ADMIN_COMMANDS`` at once, each command
    in a loop of its own the whole time, as when it raced them alone (the loops
    race each other too); one set of builder processes for all. The builders'
    reports, and per command whether its loop was still running when the builds
    ended (it never raised)."""
    root = tmp_path_factory.mktemp("admin-race") / "shared"
    env = {**os.environ, "POLYKERNEL_CACHE_DIR": str(root)}
    loops = {
        admin: zygote.start(["-c", ADMIN_LOOP.format(admin=admin)], env=env)
        for admin in ADMIN_COMMANDS
    }
    try:
        reports = _stress(env, processes=3, kernels=2)
        survived = {admin: loop.poll() is None for admin, loop in loops.items()}
    finally:
        for loop in loops.values():
            loop.kill()
            loop.communicate(timeout=60)
    return reports, survived


@pytest.mark.slow
@pytest.mark.parametrize("admin", ADMIN_COMMANDS)
def test_an_admin_command_racing_builds_breaks_none(admin_race, admin):
    reports, survived = admin_race
    assert all(r["ok"] for r in reports), [r["errors"] for r in reports]
    assert survived[admin], f"cache_admin.{admin} raised while builds ran"


@pytest.mark.slow
def test_without_file_locks_builders_never_publish_a_mixed_entry(tmp_path, run_env):
    root = tmp_path / "shared"
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(root),
           "POLYKERNEL_CACHE_LOCKING": "0"}  # fmt: skip
    reports = _stress(env, processes=4, kernels=2)
    assert all(r["ok"] for r in reports), [r["errors"] for r in reports]
    assert not list(root.glob("*/locks"))  # no lock was taken
    for meta in root.glob("*/*/meta.json"):  # every published entry is whole
        assert cache_admin.root_problem(root) is None
        record = json.loads(meta.read_text())
        for name, expected in record["files"].items():
            data = (meta.parent / name).read_bytes()
            assert len(data) == expected["size"], meta
    again = _stress(env, processes=1, kernels=2)[0]
    assert again["ok"] and again["native"] == [False, False]
    assert again["numba"] == ["disk", "disk"]
