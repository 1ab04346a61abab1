"""The typed public API: the ``py.typed`` marker, the pyright configuration, and the
type aliases of :mod:`polykernel.types` agreeing with the run-time vocabularies.

The pyright run itself (zero errors in basic mode) is a CI step, not a test.
"""

from __future__ import annotations

import tomllib
from typing import get_args

import pytest
from subprocess_support import REPO

ROOT = REPO
PACKAGE = ROOT / "src" / "polykernel"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_package_is_marked_typed_and_the_wheel_ships_the_marker():
    marker = PACKAGE / "py.typed"
    assert marker.is_file()
    assert marker.read_text() == ""
    wheel = _pyproject()["tool"]["hatch"]["build"]["targets"]["wheel"]
    # The wheel takes the whole package folder, so the marker is in it.
    assert "src/polykernel" in wheel["packages"]
    assert not any("py.typed" in p for p in wheel.get("exclude", []))


def test_pyright_is_configured_for_the_package_in_basic_mode():
    config = _pyproject()["tool"]["pyright"]
    assert config["include"] == ["src/polykernel"]
    assert config["typeCheckingMode"] == "basic"
    assert config["pythonVersion"] == "3.11"


def test_type_aliases_match_the_runtime_vocabularies():
    from polykernel import types
    from polykernel.contract.options import VMAP_METHODS
    from polykernel.ffi.handler_ir.signature import HALF_MODES
    from polykernel.platforms import PLATFORMS, Platform

    assert get_args(types.PlatformName) == PLATFORMS == tuple(p.value for p in Platform)
    assert get_args(types.VmapMethod) == tuple(m for m in VMAP_METHODS if m)
    assert get_args(types.HalfPrecision) == HALF_MODES
    assert set(types.__all__) <= set(dir(types))


def test_the_typed_ir_builder_is_llvmlites_at_run_time():
    ir = pytest.importorskip("llvmlite.ir")
    from polykernel.ffi.handler_ir.builder import Builder

    assert Builder is ir.IRBuilder
