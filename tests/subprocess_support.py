"""Python in a fresh process, for tests that need one (import side effects, env
variables read at start-up, several processes): one helper instead of many copies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_python(
    *args: str | Path,
    code: str | None = None,
    env: dict[str, str],
    timeout: float = 120,
    cwd: str | Path | None = None,
) -> str:
    """Run ``python -c code`` or ``python *args``; assert exit 0; return stdout."""
    argv = ["-c", code] if code is not None else [str(a) for a in args]
    proc = subprocess.run(
        [sys.executable, *argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


def last_json(stdout: str) -> Any:
    """The JSON document on the last line of ``stdout``."""
    return json.loads(stdout.strip().splitlines()[-1])
