"""House rule: no source file in src/ above ~400 lines (DESIGN.md §2).

It covers the native sources shipped in the package too (the GPU launcher's .cc
and its headers, our include/ headers), not only Python modules.
"""

from __future__ import annotations

from pathlib import Path

from subprocess_support import REPO

SRC = REPO / "src" / "polykernel"
LIMIT = 400
SUFFIXES = {".py", ".cc", ".cpp", ".cu", ".h", ".cuh"}


def _sources() -> list[Path]:
    return [p for p in SRC.rglob("*") if p.suffix in SUFFIXES]


def test_no_module_above_limit():
    too_big = {
        str(p.relative_to(SRC)): n
        for p in _sources()
        if (n := len(p.read_text().splitlines())) > LIMIT
    }
    assert too_big == {}, f"split these modules by responsibility: {too_big}"


def test_the_native_sources_are_checked_too():
    checked = {p.relative_to(SRC).as_posix() for p in _sources()}
    launcher = {"launcher/csrc/gpu_launcher.cc", "launcher/csrc/gpu_launcher/plan.h"}
    assert launcher <= checked
