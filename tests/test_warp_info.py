"""The Warp row of ``polykernel info``."""

from __future__ import annotations

import importlib.metadata
import importlib.util

import pytest

from polykernel.cli.info import gather_info
from polykernel.cli.info_warp import warp_report


def test_warp_row_reports_version_cpu_use_and_gpu_build_check():
    rows = {r["backend"]: r for r in gather_info()["gpu_backends"]}
    row = rows["warp"]
    if importlib.util.find_spec("warp") is None:
        assert row["version"] is None and row["cpu"] is False
        assert "pip install 'polykernel[warp]'" in row["cpu_detail"]
        return
    import warp

    assert row["version"] == warp.__version__
    assert row["cpu"] is True
    assert "native FFI handler" in row["cpu_detail"]
    assert row["gpu_build"] is True
    assert "never launched here (no GPU)" in row["gpu_build_detail"]


def test_without_warp_the_row_says_how_to_install(monkeypatch):
    import polykernel.cli.info_warp as mod

    monkeypatch.setattr(mod.importlib.metadata, "version", _missing)
    row = warp_report()
    assert row == {
        "backend": "warp", "version": None, "cpu": False,
        "cpu_detail": "warp-lang is not installed (pip install 'polykernel[warp]')",
        "gpu_build": False,
        "gpu_build_detail": "warp-lang is not installed "
        "(pip install 'polykernel[warp]')",
    }  # fmt: skip


def _missing(name):
    raise importlib.metadata.PackageNotFoundError(name)


@pytest.mark.parametrize("gpu", [False, True])
def test_text_output_has_the_three_facts(capsys, gpu):
    from polykernel.cli.info_warp import print_warp_report

    print_warp_report(warp_report(gpu))
    out = capsys.readouterr().out
    assert out.startswith("  warp")
    assert "\n    cpu " in out and "\n    gpu build " in out
