"""The Numba handler cache never serves another kernel's code, in any process.

Every scenario runs real processes sharing one ``POLYKERNEL_CACHE_DIR``: a cached
artefact is only correct if a *later* process, which compiled other kernels first
(and so handed out the same per-process Numba symbol names), still gets the code
the artefact was built from (numba/numba#10486 is the mechanism that broke it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("numba_cache_child.py")
X = [0.0, 1.0, 2.0, 3.0]
EXPECT = {
    "A": [v + 1 for v in X],
    "B": [v * 10 for v in X],
    "C3": [v + 3 for v in X],
    "C4": [v + 4 for v in X],
    "G5": [v * 5 for v in X],
    "G7": [v * 7 for v in X],
}


def _child(env: dict, *variants: str) -> dict[str, list[float]]:
    proc = subprocess.run(
        [sys.executable, str(CHILD), *variants],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line]
    return {r["variant"]: r["out"] for r in rows}


def _env(run_env: dict, tmp_path: Path) -> dict:
    return dict(run_env, POLYKERNEL_CACHE_DIR=str(tmp_path / "pk"))


def test_same_named_kernels_in_both_orders(run_env, tmp_path):
    env = _env(run_env, tmp_path)
    assert _child(env, "B") == {"B": EXPECT["B"]}
    assert _child(env, "A", "B") == {"A": EXPECT["A"], "B": EXPECT["B"]}
    assert _child(env, "B", "A") == {"B": EXPECT["B"], "A": EXPECT["A"]}
