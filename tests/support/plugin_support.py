"""Helpers for the plugin tests: a backend table and reviver list private to one test,
entry points of the ``polykernel.backends`` group the test chooses, and a real
installed distribution (a ``*.dist-info`` folder) for tests in a fresh process.

The objects entry points name live in ``plugin_objects.py``. Test modules load this
one with ``pytest_plugins = ("plugin_support",)`` (importing it directly would keep
pytest from rewriting its asserts).
"""

from __future__ import annotations

import importlib.metadata
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from polykernel import backends
from polykernel.ffi import targets

HERE = Path(__file__).parent


@pytest.fixture
def isolated_table(monkeypatch: pytest.MonkeyPatch):
    """The backend table and the reviver list, restored after the test."""
    backends.all_backends()  # the built-in ones (and installed plugins) first
    monkeypatch.setattr(backends, "_loaded", dict(backends._loaded))
    monkeypatch.setattr(backends, "_broken", list(backends._broken))
    monkeypatch.setattr(backends, "_revivers_installed",
                        set(backends._revivers_installed))  # fmt: skip
    monkeypatch.setattr(targets, "_revivers", list(targets._revivers))
    return backends


@pytest.fixture
def entry_points(
    monkeypatch: pytest.MonkeyPatch, isolated_table
) -> Callable[..., None]:
    """``entry_points("name = module:attr", ...)``: the group holds exactly these,
    and the table reads it again at its next listing."""

    def install(*lines: str) -> None:
        points = [
            importlib.metadata.EntryPoint(
                *(part.strip() for part in line.split("=", 1)),
                group=backends.ENTRY_POINT_GROUP,
            )
            for line in lines
        ]
        real = importlib.metadata.entry_points

        def fake(**selection):
            if selection.get("group") == backends.ENTRY_POINT_GROUP:
                return importlib.metadata.EntryPoints(points)
            return real(**selection)  # JAX looks its own plugins up too

        monkeypatch.setattr(importlib.metadata, "entry_points", fake)
        monkeypatch.setattr(backends, "_entry_points_read", False)

    return install


@pytest.fixture
def distribution() -> Callable[[Path, list[str], list[str]], Path]:
    """``distribution(site, lines, modules)``: see :func:`install_distribution`."""
    return install_distribution


def install_distribution(
    site: Path,
    lines: list[str],
    modules: list[str],
    group: str = backends.ENTRY_POINT_GROUP,
) -> Path:
    """A distribution ``pk-test-plugins`` in ``site`` (put it on ``PYTHONPATH``),
    declaring ``lines`` in ``group`` (the backends' by default), with copies of
    ``tests/support/<module>.py``."""
    info = site / "pk_test_plugins-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pk-test-plugins\nVersion: 1.0\n"
    )
    body = "\n".join(lines)
    (info / "entry_points.txt").write_text(
        f"[{group}]\n{textwrap.dedent(body)}\n"
    )
    for module in modules:
        (site / f"{module}.py").write_text((HERE / f"{module}.py").read_text())
    return site
