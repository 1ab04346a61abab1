from __future__ import annotations

"""The single source of the package version."""

__version__ = "0.1.0.dev0"


def installed_version(dist: str) -> str | None:
    """The installed version of distribution ``dist`` (``"numba-cuda"``), or None."""
    import importlib.metadata

    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None
