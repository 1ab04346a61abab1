"""Process-wide settings: the reference API's ``config.*`` setters and where
polykernel keeps its cache and configuration.

``config.set_backend(...)`` and the other setters of the reference's ``config``
module port unchanged (they are also top-level names); the cache and config
directories and the on/off environment variables are polykernel's own. The code
lives in :mod:`polykernel.settings`; this module is its public face.

Environment variables:
    POLYKERNEL_CACHE_DIR: root of every on-disk cache (compiled libraries, Numba
        handlers). Default: the per-user cache directory, ``$XDG_CACHE_HOME/polykernel``
        or ``~/.cache/polykernel``. :func:`set_cache_dir` overrides it in-process.
    POLYKERNEL_CONFIG_DIR: where the tuned table (``tuned.json``: tuned entries and
        saved defaults) lives. Default:
        ``$XDG_CONFIG_HOME/polykernel`` or ``~/.config/polykernel``.

Example:
    >>> import polykernel.config as cfg
    >>> cfg.get_backend("cpu") is None
    True
"""

from __future__ import annotations

from .settings.paths import (
    CACHE_ENV,
    CONFIG_ENV,
    cache_root,
    config_dir,
    ensure_private_dir,
    env_flag,
    get_cache_dir,
    set_cache_dir,
)
from .settings.preferences import (
    PLATFORMS,
    clear_backends,
    get_backend,
    get_compute_capability,
    get_numba_num_threads,
    get_numba_parallel,
    get_tuning_miss_warnings,
    set_backend,
    set_compute_capability,
    set_numba_parallel,
    set_tuning_miss_warnings,
)

__all__ = [
    "CACHE_ENV",
    "CONFIG_ENV",
    "PLATFORMS",
    "cache_root",
    "clear_backends",
    "config_dir",
    "ensure_private_dir",
    "env_flag",
    "get_backend",
    "get_cache_dir",
    "get_compute_capability",
    "get_numba_num_threads",
    "get_numba_parallel",
    "get_tuning_miss_warnings",
    "set_backend",
    "set_cache_dir",
    "set_compute_capability",
    "set_numba_parallel",
    "set_tuning_miss_warnings",
]
