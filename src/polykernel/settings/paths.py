"""Where polykernel keeps things: the cache and config directories, on/off variables.

Nothing here runs at import: the cache root is computed (never created) when asked for,
and :func:`ensure_private_dir` creates a directory only when a caller is about to write.

Public through :mod:`polykernel.config`, beside the reference's ``config.*`` setters.

The environment variables it reads (``POLYKERNEL_CACHE_DIR``,
``POLYKERNEL_CONFIG_DIR``) are documented in :mod:`polykernel.config`.

On/off variables (``POLYKERNEL_CACHE_LOCKING``) are read by :func:`env_flag`, the one
parser of them: ``0``, ``false``, ``no``, ``off`` mean off, ``1``, ``true``, ``yes``,
``on`` mean on (any case, spaces ignored), unset or empty is the default, and
anything else is one warning naming the variable, then the default.
"""

from __future__ import annotations

import os
import stat
import threading
import warnings
from pathlib import Path

from ..errors import (
    CacheError,
    KernelRegistrationError,
    KernelTypeError,
    PolykernelWarning,
)

__all__ = [
    "cache_root",
    "config_dir",
    "ensure_private_dir",
    "env_flag",
    "get_cache_dir",
    "set_cache_dir",
]

CACHE_ENV = "POLYKERNEL_CACHE_DIR"
CONFIG_ENV = "POLYKERNEL_CONFIG_DIR"

_lock = threading.Lock()
_cache_dir: Path | None = None  # set_cache_dir() override
#: The spellings :func:`env_flag` accepts (compared stripped and lower-cased).
FLAG_OFF = ("0", "false", "no", "off")
FLAG_ON = ("1", "true", "yes", "on")
_flags_warned: set[tuple[str, str]] = set()


def env_flag(
    name: str, default: bool, category: type[Warning] = PolykernelWarning
) -> bool:
    """The on/off setting of environment variable ``name`` (``default`` when unset).

    ``0``, ``false``, ``no``, ``off`` are off; ``1``, ``true``, ``yes``, ``on`` are on
    (any case, surrounding spaces ignored); unset or empty is ``default``. Any other
    value is ``default`` after one warning of ``category`` per variable, value and
    process, naming the variable, the value and the accepted spellings.

    Example:
        >>> from polykernel.settings.paths import env_flag
        >>> env_flag("POLYKERNEL_NO_SUCH_FLAG", default=True)  # unset: the default
        True
    """
    raw = os.environ.get(name, "")
    text = raw.strip().lower()
    if not text:
        return default
    if text in FLAG_ON:
        return True
    if text in FLAG_OFF:
        return False
    with _lock:
        first = (name, raw) not in _flags_warned
        _flags_warned.add((name, raw))
    if first:
        warnings.warn(
            f"polykernel: ${name}={raw!r} is not an on/off value; using the default "
            f"({'on' if default else 'off'}). Set it to one of "
            f"{', '.join(FLAG_OFF)} (off) or {', '.join(FLAG_ON)} (on), in any case.",
            category,
            stacklevel=3,
        )
    return default


def _user_dir(xdg_var: str, fallback: str) -> Path:
    base = os.environ.get(xdg_var)
    if base:
        return Path(base) / "polykernel"
    return Path.home() / fallback / "polykernel"


def cache_root() -> Path:
    """Return the cache root directory (not created).

    :func:`set_cache_dir` wins over ``$POLYKERNEL_CACHE_DIR``, which wins over the
    per-user default.

    Example:
        >>> import polykernel.config as cfg  # this module's public face
        >>> from pathlib import Path
        >>> isinstance(cfg.cache_root(), Path)
        True
    """
    if _cache_dir is not None:
        return _cache_dir
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


def ensure_private_dir(path: Path, env: str = CACHE_ENV) -> Path:
    """Create ``path`` (owner-only) if needed and check nobody else can write to it.

    A shared library must never be loaded from a directory other users can write, since
    they could swap the file between our checksum check and ``dlopen``; a tuned table
    in such a directory could be swapped for one that picks another kernel. ``env``
    is the variable that points at the directory (``$POLYKERNEL_CACHE_DIR``, or
    ``$POLYKERNEL_CONFIG_DIR`` for the config directory): the messages name it.

    Raises:
        CacheError: the directory cannot be created, is not a directory, is owned by
            another user, or is writable by group or others.
    """
    path = Path(path)
    what = "config" if env == CONFIG_ENV else "cache"
    where = f"polykernel {what}"
    if path.exists() and not path.is_dir():
        raise CacheError(
            f"{where}: '{path}' exists but is not a directory. "
            f"Remove it or point ${env} elsewhere."
        )
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        raise CacheError(
            f"{where}: cannot create directory '{path}' ({err.strerror}). "
            f"Point ${env} at a writable directory you own."
        ) from err
    try:
        info = path.stat()
    except OSError as err:  # pragma: no cover - raced removal
        raise CacheError(f"{where}: cannot stat '{path}': {err}") from err
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise CacheError(
            f"{where}: '{path}' is owned by uid {info.st_uid}, not by you "
            f"(uid {os.getuid()}); refusing to use it. "
            f"Point ${env} at a directory you own."
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheError(
            f"{where}: '{path}' is writable by group or others "
            f"(mode {stat.S_IMODE(info.st_mode):o}); refusing to use it. "
            f"Run `chmod go-w '{path}'` or point ${env} elsewhere."
        )
    return path


# -- cache directory (reference: set_cache_dir / get_cache_dir) ------------------------
def set_cache_dir(path: str | os.PathLike | None) -> None:
    """Use ``path`` as the cache root for the rest of this process.

    The directory is created (owner-only) now, as the reference does, so a path that
    cannot be used fails here rather than at the first compile. Entries already in
    the previous root are neither moved nor deleted; subprocesses are not affected
    (set ``$POLYKERNEL_CACHE_DIR`` for them). ``None`` (our addition) goes back to
    ``$POLYKERNEL_CACHE_DIR`` or the default.

    Raises:
        KernelTypeError: ``path`` is not a string or path.
        KernelRegistrationError: ``path`` is empty.
        CacheError: the directory cannot be created or others can write to it.

    Example:
        >>> import polykernel as pk, tempfile
        >>> pk.set_cache_dir(tempfile.mkdtemp())
        >>> pk.set_cache_dir(None)  # back to $POLYKERNEL_CACHE_DIR or the default
    """
    global _cache_dir
    if path is None:
        with _lock:
            _cache_dir = None
        return
    if not isinstance(path, (str, os.PathLike)):
        raise KernelTypeError(
            f"polykernel.set_cache_dir: path must be a str, os.PathLike or None (got "
            f"{type(path).__name__}: {path!r})."
        )
    if not os.fspath(path):
        raise KernelRegistrationError(
            "polykernel.set_cache_dir: path is empty; pass the directory to use."
        )
    resolved = ensure_private_dir(Path(path).expanduser().absolute())
    with _lock:
        _cache_dir = resolved


def get_cache_dir() -> str:
    """Return the cache root in use (``set_cache_dir``, env var, or default).

    Example:
        >>> import polykernel as pk
        >>> isinstance(pk.get_cache_dir(), str)
        True
    """
    return str(cache_root())
