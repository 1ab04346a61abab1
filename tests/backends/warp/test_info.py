"""Warp's rows of ``polykernel info``."""

from __future__ import annotations

import importlib.metadata
import importlib.util

from polykernel.backends.warp.info import warp_rows
from polykernel.cli.info import gather_info


def test_warp_rows_report_version_cpu_use_and_gpu_build_check(no_gpu):
    rows = {(r["backend"], r["platform"]): r for r in gather_info()["backends"]}
    cpu, gpu = rows[("warp", "cpu")], rows[("warp", "gpu")]
    if importlib.util.find_spec("warp") is None:
        assert cpu["usable"] is False
        assert "pip install 'polykernel[warp]'" in cpu["detail"]
        return
    import warp

    assert cpu["usable"] is True
    assert cpu["detail"] == (
        f"warp-lang {warp.__version__}; Warp's CPU build behind a native FFI handler"
    )
    assert gpu["usable"] is False  # no GPU here
    assert "GPU build check available" in gpu["detail"]
    assert "never launched here (no GPU visible to JAX)" in gpu["detail"]


def test_without_warp_the_rows_say_how_to_install(monkeypatch):
    import polykernel.backends.warp.info as mod

    monkeypatch.setattr(mod.importlib.metadata, "version", _missing)
    why = "not installed (pip install 'polykernel[warp]')"
    assert warp_rows(gpu=True) == [
        ("warp", "cpu", False, why),
        ("warp", "gpu", False, why),
    ]


def _missing(name):
    raise importlib.metadata.PackageNotFoundError(name)
