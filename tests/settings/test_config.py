"""Cache and config locations, and the private-directory checks."""

from __future__ import annotations

import os

import pytest

import polykernel as pk
from polykernel import config


def test_cache_root_and_config_dir_follow_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "k"))
    assert config.cache_root() == tmp_path / "c"
    assert config.config_dir() == tmp_path / "k"
    assert not (tmp_path / "c").exists()


def test_defaults_use_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv("POLYKERNEL_CACHE_DIR", raising=False)
    monkeypatch.delenv("POLYKERNEL_CONFIG_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xk"))
    assert config.cache_root() == tmp_path / "xc" / "polykernel"
    assert config.config_dir() == tmp_path / "xk" / "polykernel"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert config.cache_root() == tmp_path / "h" / ".cache" / "polykernel"


def test_ensure_private_dir_creates_owner_only(tmp_path):
    target = config.ensure_private_dir(tmp_path / "a" / "b")
    assert target.is_dir()
    assert (target.stat().st_mode & 0o777) == 0o700


def test_ensure_private_dir_refuses_group_writable(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o775)
    with pytest.raises(pk.CacheError, match=r"writable by group or others.*chmod go-w"):
        config.ensure_private_dir(shared)


def test_ensure_private_dir_refuses_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(pk.CacheError, match="exists but is not a directory"):
        config.ensure_private_dir(path)


def test_ensure_private_dir_reports_uncreatable(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(
        pk.CacheError, match=r"cannot create directory.*POLYKERNEL_CACHE_DIR"
    ):
        config.ensure_private_dir(blocker / "sub")
