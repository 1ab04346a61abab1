"""Whole-root cache maintenance: info per backend, prune by size and age, the cap."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
import zygote

from polykernel.cache import admin as cache_admin
from polykernel.cache.locks import entry_lock
from polykernel.errors import CacheError

DAY = 86400.0


def _entry(root: Path, section: str, name: str, size: int, age_days: float) -> Path:
    entry = root / section / name
    entry.mkdir(parents=True, mode=0o700)
    (entry / "payload").write_bytes(b"x" * size)
    (entry / "meta.json").write_text("{}")
    stamp = time.time() - age_days * DAY
    for f in entry.iterdir():
        os.utime(f, (stamp, stamp))
    return entry


@pytest.fixture
def root(tmp_path, monkeypatch):
    path = tmp_path / "root"
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(path))
    monkeypatch.delenv(cache_admin.MAX_BYTES_ENV, raising=False)
    _entry(path, "native", "a" * 40, 1000, age_days=30)
    _entry(path, "numba", "b" * 40, 2000, age_days=10)
    _entry(path, "numba", "c" * 40, 3000, age_days=0)
    return path


def test_info_counts_entries_per_backend(root):
    info = cache_admin.info()
    assert info["sections"]["native"] == {"entries": 1, "bytes": 1002, "files": 2}
    assert info["sections"]["numba"] == {"entries": 2, "bytes": 5004, "files": 4}
    assert info["native_entries"] == 1 and info["numba_entries"] == 2
    assert info["bytes"] == 6006


def test_prune_by_age_then_by_size(root):
    assert cache_admin.prune(max_age=20 * DAY) == 1002  # the 30-day-old entry
    assert not (root / "native" / ("a" * 40)).exists()
    assert cache_admin.prune(max_bytes=3500) == 2002  # least recently used first
    assert (root / "numba" / ("c" * 40)).is_dir()
    assert cache_admin.prune(max_age=0.0, max_bytes=10**9) == 3002
    with pytest.raises(ValueError, match="max_age must be a non-negative number"):
        cache_admin.prune(max_age=-1)


def test_prune_skips_an_entry_being_built(root):
    with entry_lock(root / "numba", "b" * 40):
        assert cache_admin.prune(max_bytes=0) == 1002 + 3002
    assert (root / "numba" / ("b" * 40)).is_dir()


def test_size_cap_from_the_environment(root, monkeypatch):
    for text, value in (
        ("4000", 4000),
        ("1.5K", 1536),
        ("2M", 2 << 20),
        ("1GiB", 1 << 30),
    ):
        monkeypatch.setenv(cache_admin.MAX_BYTES_ENV, text)
        assert cache_admin.max_bytes_from_env() == value
    monkeypatch.setenv(cache_admin.MAX_BYTES_ENV, "4000")
    assert cache_admin.apply_size_cap() == 1002 + 2002
    monkeypatch.setenv(cache_admin.MAX_BYTES_ENV, "lots")
    with pytest.raises(CacheError, match=r"POLYKERNEL_CACHE_MAX_BYTES='lots' is not a"):
        cache_admin.apply_size_cap()


def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    # A child of the test process's zygote: as `python -m polykernel.cli` runs.
    return zygote.run(["-m", "polykernel.cli", "cache", *args], env=env, timeout=120)


@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_cli_info_and_prune(root, run_env):
    env = dict(run_env, POLYKERNEL_CACHE_DIR=str(root))
    env[cache_admin.MAX_BYTES_ENV] = "1G"
    info = _cli(env, "info")
    assert info.returncode == 0, info.stderr
    assert "native libs  1 entry (1002 B)" in info.stdout
    assert "numba handlers 2 entries (4.9 KiB)" in info.stdout
    assert "size cap     1.0 GiB ($POLYKERNEL_CACHE_MAX_BYTES)" in info.stdout
    aged = _cli(env, "prune", "--max-age", "20")
    assert aged.returncode == 0 and "pruned 1002 B" in aged.stdout
    sized = _cli(env, "prune", "--max-bytes", "3500")
    assert sized.returncode == 0 and "pruned 2.0 KiB" in sized.stdout
    bad = _cli(env, "prune")
    assert bad.returncode == 2 and "give --max-bytes N and/or --max-age" in bad.stderr
    bad = _cli(env, "prune", "--max-age", "soon")
    assert bad.returncode == 2 and "expected a number of days >= 0" in bad.stderr
