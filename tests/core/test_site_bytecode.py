"""``.ci/site-bytecode``, what ``make venv`` runs after ``pip install --no-compile``:
the bytecode of every installed module but the packages' own test folders.

Run by Python 3.11 and 3.12 (this one, or the other where one is installed: 3.12's
compile workers start from a fork server, which imports the script again), each in
a virtualenv of its own holding a made-up package.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from subprocess_support import REPO

SCRIPT = REPO / ".ci" / "site-bytecode"


def _python(line: str) -> str:
    """The interpreter of a supported Python line: this one, or the one
    ``.ci/find-python`` finds (looked up when the test runs, not at collection)."""
    if line == f"{sys.version_info[0]}.{sys.version_info[1]}":
        return sys.executable
    done = subprocess.run([str(REPO / ".ci" / "find-python"), line],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0 or not done.stdout.strip():
        pytest.skip(f"no Python {line} installed here (.ci/find-python)")
    return done.stdout.strip()


def _site(python: str, home: Path) -> tuple[Path, Path]:
    """A virtualenv of ``python`` without pip: its interpreter and site-packages."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(home)], check=True)
    inner = home / "bin" / "python"
    site = subprocess.run(
        [str(inner), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return inner, Path(site)


@pytest.mark.parametrize("line", ["3.11", "3.12"])
def test_every_module_but_the_test_folders_gets_its_bytecode(line, tmp_path):
    # The checkout's own path may hold a folder named tests: only folders below
    # site-packages are left out.
    inner, site = _site(_python(line), tmp_path / "tests" / "venv")
    kept = {"pkg/__init__.py", "pkg/core.py", "pkg/sub/deep.py", "pkg/testing.py"}
    left_out = ["pkg/tests/test_a.py", "pkg/test/helper.py", "pkg/sub/tests/t.py"]
    files = [*kept, *left_out]
    for name in files:
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text("VALUE = 1\n")
    (site / "pkg" / "broken.py").write_text("def (\n")  # skipped, as pip skips it
    done = subprocess.run([str(inner), str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    compiled = {
        str(p.parent.parent.relative_to(site) / p.name.split(".")[0]) + ".py"
        for p in site.rglob("*.pyc")
    }
    assert compiled == kept
