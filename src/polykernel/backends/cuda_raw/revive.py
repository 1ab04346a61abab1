"""Register a ``load_*`` target again from the cache alone, by its name.

``load_*`` registers each function under ``"<name>.<function>.pk<key16>"``, where
``key16`` starts the module's cache key (a digest of source, flags, toolchain and
versions). The name therefore finds the compiled library on disk without the
source: the entry ``native/<key40>/`` whose key starts with ``key16`` and whose
``meta.json`` names module ``<name>``. That is what a process needs to run a
``jax.export`` artefact built elsewhere (see :mod:`polykernel.core.exporting`).

The documented short name ``"<name>.<function>"`` is not content-derived (the
first build of a name in a process owns it), so it cannot be found this way.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import re
from pathlib import Path

from ...cache.store import read_regular, readonly_roots
from ...ffi import targets
from ...native import cache
from ...platforms import xla_platform
from ...settings import paths as config
from .build import BACKEND, identity
from .compiled import CompiledModule

__all__ = ["TARGET_PATTERN", "load_cached_target", "revive"]

#: The content-versioned target names ``load_*`` registers.
TARGET_PATTERN = re.compile(
    r"^(?P<name>.+)\.(?P<function>[^.]+)\.pk(?P<key>[0-9a-f]{16})$"
)


def _entries(prefix: str) -> list[Path]:
    """Entries whose key starts with ``prefix``: read-only tiers first."""
    found = []
    for root in [*readonly_roots(), config.cache_root()]:
        section = root / cache.SECTION
        with contextlib.suppress(OSError):
            found += sorted(p for p in section.glob(f"{prefix}*") if p.is_dir())
    return found


def _platform_of(entry: Path, meta: dict) -> str:
    """XLA's platform of a build: its recorded one, else ``cuda`` for an nvcc build
    (its translation unit is ``source.cu``)."""
    recorded = xla_platform(str(meta.get("platform", "")))
    if recorded is not None:
        return recorded
    return xla_platform("cuda" if (entry / "source.cu").exists() else "cpu")


def load_cached_target(target: str) -> str | None:
    """Register ``target`` from the native cache; return its XLA platform.

    Returns None when ``target`` is not a content-versioned ``load_*`` name or no
    valid cache entry matches it.

    Raises:
        KernelLoadError: the cached library cannot be loaded or lacks the handler.
        CacheError: the entry sits in a directory others can write to.

    Example:
        >>> from polykernel.backends.cuda_raw.revive import load_cached_target
        >>> load_cached_target("not_a_native_target") is None
        True
    """
    match = TARGET_PATTERN.match(target)
    if match is None:
        return None
    for entry in _entries(match["key"]):
        try:
            meta = json.loads(read_regular(entry / "meta.json")[0])  # never a FIFO
        except (OSError, ValueError):
            continue
        if not isinstance(meta, dict) or meta.get("name") != match["name"]:
            continue
        if not isinstance(meta.get("key"), str):
            continue
        lib = cache.lookup(meta["key"])  # verifies key, sizes, checksums
        if lib is None:
            continue
        platform = _platform_of(entry, meta)
        module = CompiledModule(lib, [match["function"]])
        handler = module.get_handler(match["function"])
        targets.register(
            target,
            ctypes.cast(handler, ctypes.c_void_p).value or 0,
            platform=platform,
            identity=identity(meta["key"], match["function"]),
            backend=BACKEND,
            label=f"{match['name']}.{match['function']}",
            owner=module,
        )
        return platform
    return None


def revive(target: str, program: str = "") -> bool:
    """The cuda_raw backend's reviver: :func:`load_cached_target` as a bool."""
    del program
    return load_cached_target(target) is not None
