"""Persisted per-primitive default backends (``defaults.json`` in the config dir).

``BenchmarkResult.save_defaults()`` and ``polykernel benchmark --save-defaults`` write
the fastest backend per (primitive, platform) here, and every ``XLACustomKernel``
reads its entry lazily on first use. The file maps primitive name to
``{platform: backend}``::

    {"mylib.csrmv": {"cpu": "numba", "gpu": "warp"}}

The file is created on the first write only (never at import), written atomically
(temporary file + ``os.replace``) inside a private directory. A damaged file never
breaks a program: it reads as empty, with a warning naming the file.

Every read-modify-write (``save_defaults``, ``clear_defaults``) holds an exclusive
OS lock (``flock`` on the config directory), so two processes saving at once each
see the other's entries and neither write is lost.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import KernelTypeError, PolykernelWarning
from .json_file import locked, write_json
from .paths import config_dir

__all__ = [
    "clear_defaults",
    "defaults_path",
    "load_defaults",
    "persisted_default",
    "save_defaults",
]

FILE_NAME = "defaults.json"


def defaults_path() -> Path:
    """Return the path of the defaults file (it may not exist).

    Example:
        >>> from polykernel.settings.tuned_defaults import defaults_path
        >>> defaults_path().name
        'defaults.json'
    """
    return config_dir() / FILE_NAME


def _valid_entries(raw: object, path: Path) -> dict[str, dict[str, str]]:
    if not isinstance(raw, dict):
        warnings.warn(
            f"polykernel: ignoring {path}: expected a JSON object mapping primitive "
            f"name to {{platform: backend}}, got {type(raw).__name__}. Fix or delete "
            "it (`polykernel defaults clear`).",
            PolykernelWarning,
            stacklevel=3,
        )
        return {}
    result: dict[str, dict[str, str]] = {}
    for name, per_platform in raw.items():
        if isinstance(per_platform, dict):
            good = {
                p: b
                for p, b in per_platform.items()
                if isinstance(p, str) and isinstance(b, str)
            }
            if good:
                result[str(name)] = good
    return result


def load_defaults() -> dict[str, dict[str, str]]:
    """Return every persisted default as ``{primitive: {platform: backend}}``.

    A missing file gives ``{}``; an unreadable or malformed one gives ``{}`` and a
    :class:`~polykernel.errors.PolykernelWarning`.

    Example:
        >>> from polykernel.settings.tuned_defaults import load_defaults
        >>> isinstance(load_defaults(), dict)
        True
    """
    path = defaults_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except UnicodeDecodeError as err:
        warnings.warn(
            f"polykernel: ignoring {path}: not UTF-8 text ({err.reason} at byte "
            f"{err.start}), so not valid JSON. Fix or delete it (`polykernel "
            "defaults clear`).",
            PolykernelWarning,
            stacklevel=2,
        )
        return {}
    except OSError as err:
        warnings.warn(
            f"polykernel: cannot read tuned defaults {path} ({err.strerror}); "
            "using the built-in defaults.",
            PolykernelWarning,
            stacklevel=2,
        )
        return {}
    try:
        raw = json.loads(text)
    except ValueError as err:
        warnings.warn(
            f"polykernel: ignoring {path}: not valid JSON ({err}). Fix or delete it "
            "(`polykernel defaults clear`).",
            PolykernelWarning,
            stacklevel=2,
        )
        return {}
    return _valid_entries(raw, path)


def persisted_default(name: str, platform: str) -> str | None:
    """Return the persisted backend of primitive ``name`` on ``platform``, if any.

    Example:
        >>> from polykernel.settings.tuned_defaults import persisted_default
        >>> persisted_default("no.such.primitive", "cpu") is None
        True
    """
    return load_defaults().get(name, {}).get(platform)


def _check_mapping(mapping: Mapping[str, Mapping[str, str]]) -> None:
    if not isinstance(mapping, Mapping):
        raise KernelTypeError(
            "polykernel save_defaults: expected a mapping "
            "{primitive: {platform: backend}}, got "
            f"{type(mapping).__name__}."
        )
    for name, per_platform in mapping.items():
        ok = isinstance(name, str) and isinstance(per_platform, Mapping)
        ok = ok and all(
            isinstance(p, str) and isinstance(b, str) for p, b in per_platform.items()
        )
        if not ok:
            raise KernelTypeError(
                "polykernel save_defaults: entry "
                f"{name!r}: {per_platform!r} is not {{platform: backend}} with "
                "string keys and values, e.g. {'mylib.op': {'cpu': 'numba'}}."
            )


def save_defaults(mapping: Mapping[str, Mapping[str, str]]) -> Path:
    """Merge ``mapping`` into the defaults file and return its path.

    Entries for other primitives and platforms are kept; the given ones replace
    what was stored. The file and its directory are created if needed.

    Raises:
        TypeError: ``mapping`` is not ``{str: {str: str}}``.

    Example:
        >>> from polykernel.settings.tuned_defaults import (
        ...     save_defaults, persisted_default,
        ... )
        >>> path = save_defaults({"docs.op": {"cpu": "numba"}})
        >>> persisted_default("docs.op", "cpu")
        'numba'
    """
    _check_mapping(mapping)
    with locked(defaults_path()):
        data = load_defaults()
        for name, per_platform in mapping.items():
            data.setdefault(name, {}).update(per_platform)
        return write_json(defaults_path(), data)


def clear_defaults(names: Iterable[str] | None = None) -> list[str]:
    """Forget persisted defaults, all of them or those of ``names``.

    Returns the names actually removed. The file is not created when absent.

    Example:
        >>> from polykernel.settings.tuned_defaults import save_defaults, clear_defaults
        >>> _ = save_defaults({"docs.tmp": {"cpu": "jax_raw"}})
        >>> clear_defaults(["docs.tmp"])
        ['docs.tmp']
    """
    if not defaults_path().exists():
        return []  # nothing to clear, and clearing never creates the directory
    with locked(defaults_path()):
        data = load_defaults()
        if names is None:
            removed = sorted(data)
            data = {}
        else:
            wanted = [names] if isinstance(names, str) else list(names)
            removed = [n for n in wanted if n in data]
            for n in removed:
                del data[n]
        if removed or names is None:
            write_json(defaults_path(), data)
    return removed
