"""House rule: no module in src/ above ~400 lines (DESIGN.md §2)."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).parent.parent / "src" / "polykernel"
LIMIT = 400


def test_no_module_above_limit():
    too_big = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > LIMIT
    }
    assert too_big == {}, f"split these modules by responsibility: {too_big}"
