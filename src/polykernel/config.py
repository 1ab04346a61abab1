"""Process-wide settings read from the environment at the moment they are used.

Nothing here runs at import: the cache root is computed (never created) when asked for,
and :func:`ensure_private_dir` creates a directory only when a caller is about to write.

Environment variables:
    POLYKERNEL_CACHE_DIR: root of every on-disk cache (compiled libraries, Numba
        handlers). Default: the per-user cache directory, ``$XDG_CACHE_HOME/polykernel``
        or ``~/.cache/polykernel``.
    POLYKERNEL_CONFIG_DIR: where persisted settings (tuned defaults) live. Default:
        ``$XDG_CONFIG_HOME/polykernel`` or ``~/.config/polykernel``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import CacheError

__all__ = ["cache_root", "config_dir", "ensure_private_dir"]

CACHE_ENV = "POLYKERNEL_CACHE_DIR"
CONFIG_ENV = "POLYKERNEL_CONFIG_DIR"


def _user_dir(xdg_var: str, fallback: str) -> Path:
    base = os.environ.get(xdg_var)
    if base:
        return Path(base) / "polykernel"
    return Path.home() / fallback / "polykernel"


def cache_root() -> Path:
    """Return the cache root directory (not created).

    Example:
        >>> import polykernel.config as cfg
        >>> isinstance(cfg.cache_root(), Path)
        True
    """
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return _user_dir("XDG_CACHE_HOME", ".cache")


def config_dir() -> Path:
    """Return the directory for persisted user settings (not created)."""
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        return Path(explicit).expanduser()
    return _user_dir("XDG_CONFIG_HOME", ".config")


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (owner-only) if needed and check nobody else can write to it.

    A shared library must never be loaded from a directory other users can write, since
    they could swap the file between our checksum check and ``dlopen``.

    Raises:
        CacheError: the directory cannot be created, is not a directory, is owned by
            another user, or is writable by group or others.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CacheError(
            f"polykernel cache: '{path}' exists but is not a directory. "
            f"Remove it or point ${CACHE_ENV} elsewhere."
        )
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise CacheError(
            f"polykernel cache: cannot create directory '{path}' ({err.strerror}). "
            f"Point ${CACHE_ENV} at a writable directory you own."
        ) from err
    try:
        info = path.stat()
    except OSError as err:  # pragma: no cover - raced removal
        raise CacheError(f"polykernel cache: cannot stat '{path}': {err}") from err
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise CacheError(
            f"polykernel cache: '{path}' is owned by uid {info.st_uid}, not by you "
            f"(uid {os.getuid()}); refusing to load code from it. "
            f"Point ${CACHE_ENV} at a directory you own."
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"polykernel cache: '{path}' is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):o}); refusing to load code from it. "
            f"Run `chmod go-w '{path}'` or point ${CACHE_ENV} elsewhere."
        )
    return path
