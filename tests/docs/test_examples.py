"""Every script in examples/ runs to completion (each checks its own numbers).

Each runs as ``python SCRIPT`` would, in a fresh process of its own, forked by this
test process's zygote (``zygote.py``: JAX, NumPy, Numba and polykernel are imported
once, not once per script).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from subprocess_support import REPO, missing_optional
from zygote import run_script

EXAMPLES = sorted((REPO / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
@pytest.mark.slow  # over a second here (subprocesses, compiles)
def test_example_runs(script: Path, run_env: dict[str, str]) -> None:
    if missing := missing_optional(script.read_text()):
        pytest.skip(f"{script.name} needs {missing}, not installed here")
    proc = run_script(script, env=run_env, timeout=300)
    assert proc.returncode == 0, (
        f"{script.name} failed (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
