"""Every script in examples/ runs to completion (each checks its own numbers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from subprocess_support import REPO, missing_optional

EXAMPLES = sorted((REPO / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_example_runs(script: Path, run_env: dict[str, str]) -> None:
    if missing := missing_optional(script.read_text()):
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
