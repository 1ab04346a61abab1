"""Every fault of a cache entry is a miss with one ``pk.CacheWarning`` per cause.

``CACHE_FAULTS``: an entry damaged one way per row is a miss (never an exception),
the first read warns once naming the cause and the path, a second read only logs,
and publishing the entry again replaces it. ``IRREGULAR``: a FIFO, a folder or a
device where a regular file of the cache should be is a miss too, never a read that
waits forever: each row runs in a child process with a timeout.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from subprocess_support import last_json, run_python

import polykernel as pk
from polykernel.cache.entries import META, publish_entry, read_entry

SECTION = "testsec"
KEY = "ab" * 32
FILES = {"a.bin": b"artefact bytes", "b.bin": b"more"}


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty private cache root, and warnings not yet given in this process."""
    root = tmp_path / "cache"
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(root))
    monkeypatch.delenv("POLYKERNEL_CACHE_READONLY", raising=False)
    monkeypatch.setattr("polykernel.cache.store._warned", set())
    return root


def _publish(key: str = KEY) -> Path:
    entry = publish_entry(SECTION, key, FILES, {"what": "test"})
    assert entry is not None and read_entry(SECTION, key) is not None
    return entry


def _meta(entry: Path, **changes) -> None:
    record = json.loads((entry / META).read_text())
    (entry / META).write_text(json.dumps({**record, **changes}))


def _replace_with_folder(path: Path) -> None:
    path.unlink()
    path.mkdir()


def _row(id: str, damage: Callable[[Path], object], cause: str):
    return pytest.param(damage, cause, id=id)


CACHE_FAULTS = [
    _row("no-meta", lambda e: (e / META).unlink(),
         r"a half-written cache entry: '.*' has no meta\.json"),
    _row("meta-not-json", lambda e: (e / META).write_text("{oops"),
         r"a damaged cache entry: '.*meta\.json' is not JSON"),
    _row("meta-a-list", lambda e: (e / META).write_text("[1, 2]"),
         r"a damaged cache entry: '.*meta\.json' is not an entry's record"),
    _row("files-not-records", lambda e: _meta(e, files={"a.bin": 3}),
         r"a damaged cache entry: '.*meta\.json' lists its files wrongly"),
    _row("foreign-key", lambda e: _meta(e, key="0" * 64),
         r"a cache entry of another key: '.*meta\.json' does not record key abab"),
    _row("truncated", lambda e: (e / "a.bin").write_bytes(b"arte"),
         r"a damaged cache entry: '.*a\.bin' does not match its size and checksum"),
    _row("same-size-garbage", lambda e: (e / "b.bin").write_bytes(b"MORE"),
         r"a damaged cache entry: '.*b\.bin' does not match its size and checksum"),
    _row("file-missing", lambda e: (e / "b.bin").unlink(),
         r"a damaged cache entry: a file of '.*' is missing"),
    _row("meta-a-folder", lambda e: _replace_with_folder(e / META),
         r"a cache file that is not a regular file: .*meta\.json' is a folder"),
    _row("artefact-a-folder", lambda e: _replace_with_folder(e / "a.bin"),
         r"a cache file that is not a regular file: .*a\.bin' is a folder"),
    _row("group-writable", lambda e: e.chmod(0o770),
         r"the cache is writable by others: cannot use '.*'"),
    _row("entry-is-a-file", lambda e: (shutil.rmtree(e), e.write_bytes(b"x")),
         r"a path of the cache is a file: cannot read '.*meta\.json'"),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "cause"), CACHE_FAULTS)
def test_a_faulty_entry_is_a_miss_with_one_warning_then_replaced(
    fresh_cache, caplog, damage, cause
):
    entry = _publish()
    damage(entry)
    with pytest.warns(pk.CacheWarning, match=cause) as seen:
        assert read_entry(SECTION, KEY) is None
    assert len(seen) == 1
    assert "It is a miss: the kernel is built again" in str(seen[0].message)
    with caplog.at_level(logging.INFO, logger="polykernel.cache.store"):
        assert read_entry(SECTION, KEY) is None  # no second warning: a log line
    assert any("polykernel cache:" in r.getMessage() for r in caplog.records)
    assert publish_entry(SECTION, KEY, FILES, {"what": "test"}) == entry  # rebuilt
    found = read_entry(SECTION, KEY)
    assert found is not None and found.files == FILES


def test_an_absent_entry_is_a_silent_miss(fresh_cache):
    assert read_entry(SECTION, KEY) is None  # filterwarnings=error: no warning
    fresh_cache.mkdir()
    assert read_entry(SECTION, KEY) is None


def test_one_warning_per_cause_and_process(fresh_cache):
    keys = ["c" * 64, "d" * 64, "e" * 64]
    entries = [_publish(k) for k in keys]
    for entry in entries[:2]:  # two entries damaged the same way: one cause
        (entry / "a.bin").write_bytes(b"x")
    _meta(entries[2], key="0" * 64)  # another cause
    with pytest.warns(pk.CacheWarning) as seen:
        assert all(read_entry(SECTION, k) is None for k in keys)
    causes = sorted(str(w.message).split(":")[1].strip() for w in seen)
    assert causes == ["a cache entry of another key", "a damaged cache entry"]


def test_a_malformed_numba_record_is_a_miss_with_a_warning(fresh_cache):
    from polykernel.backends.numba import cache as numba_cache

    publish_entry(numba_cache.SECTION, KEY, {numba_cache.OBJECT: b"obj"}, {})
    with pytest.warns(pk.CacheWarning, match=r"damaged .* lacks a Numba handler's"):
        assert numba_cache.lookup(KEY) is None


# -- a FIFO, a folder or a device where a file should be: never a hang -------------
CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    from polykernel.cache import admin as cache_admin
    from polykernel.cache.entries import publish_entry, read_entry
    from polykernel.native import cache as native
    section, key, action = sys.argv[1:4]
    files = {"a.bin": b"artefact bytes", "b.bin": b"more"}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if action == "read":
            first = read_entry(section, key)
            publish_entry(section, key, files, {"what": "test"})
            again = read_entry(section, key)
            result = [first is None, again is not None and again.files == files]
        elif action == "clear-cache":
            result = native.clear_cache("some_module")
        else:
            result = cache_admin.clear() >= 0
    print(json.dumps({"result": result,
                      "warnings": [str(w.message) for w in seen]}))
    """
)


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _link_to(target_of: Callable[[Path], Path]) -> Callable[[Path], None]:
    def make(path: Path) -> None:
        target = target_of(path)
        path.unlink()
        path.symlink_to(target)

    return make


def _fifo_beside(path: Path) -> Path:
    fifo = path.with_name(f"{path.name}.fifo")
    os.mkfifo(fifo)
    return fifo


IRREGULAR = [
    pytest.param(SECTION, META, _fifo, "read", [True, True], "a FIFO",
                 id="meta-a-fifo"),
    pytest.param(SECTION, "a.bin", _fifo, "read", [True, True], "a FIFO",
                 id="artefact-a-fifo"),
    pytest.param(SECTION, "b.bin", _link_to(_fifo_beside), "read", [True, True],
                 "a FIFO", id="artefact-a-link-to-a-fifo"),
    pytest.param(SECTION, "a.bin", _link_to(lambda p: Path(os.devnull)), "read",
                 [True, True], "a character device", id="artefact-a-device"),
    pytest.param("native", META, _fifo, "clear-cache", 0, None,
                 id="native-clear-cache-meta-a-fifo"),
    pytest.param(SECTION, "lock", _fifo, "clear", True, None, id="lock-file-a-fifo"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("section", "name", "make", "action", "result", "cause"), IRREGULAR
)
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_only_regular_files_are_opened(
    fresh_cache, run_env, section, name, make, action, result, cause
):
    entry = publish_entry(section, KEY, FILES, {"what": "test"})
    assert entry is not None
    if name == "lock":  # the entry's lock file, as `clear` finds it
        path = entry.parent / "locks" / f"{KEY[:40]}.lock"
        path.parent.mkdir(mode=0o700)
        path.write_bytes(b"")
    else:
        path = entry / name
    make(path)
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(fresh_cache)}
    # A read that waits on the FIFO would hang: the child's timeout fails the test.
    out = last_json(run_python("-c", CHILD, section, KEY, action, env=env, timeout=90,
                               forked=True))  # fmt: skip
    assert out["result"] == result
    if cause is None:
        assert out["warnings"] == []
    else:
        (warning,) = out["warnings"]
        assert "a cache file that is not a regular file" in warning
        assert f"{name}' is {cause}, not a regular file" in warning
