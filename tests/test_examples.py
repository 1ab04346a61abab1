"""Every script in examples/ runs to completion (each checks its own numbers)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))
#: Optional packages an example may import (``make test`` installs them all; a GPU
#: machine without network may lack one, e.g. warp-lang).
OPTIONAL = ("warp", "triton", "numba")


def _missing_optional(script: Path) -> list[str]:
    imported = set(re.findall(r"^(?:import|from) (\w+)", script.read_text(), re.M))
    return [m for m in OPTIONAL if m in imported and not importlib.util.find_spec(m)]


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(script: Path, run_env: dict[str, str]) -> None:
    if missing := _missing_optional(script):
        pytest.skip(f"{script.name} needs {missing}, not installed here")
    proc = subprocess.run(
        [sys.executable, str(script)],
        env=run_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (
        f"{script.name} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
