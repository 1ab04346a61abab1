"""``.ci/site-bytecode``, what ``make venv`` runs after ``pip install --no-compile``:
the bytecode of every installed module but the packages' own test folders.

Run by each supported Python that is here (this one and the other of 3.11 and 3.12:
3.12's compile workers start from a fork server, which imports the script again),
each in a virtualenv of its own holding a made-up package.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest
from subprocess_support import REPO

SCRIPT = REPO / ".ci" / "site-bytecode"


def _pythons() -> list[str]:
    """This interpreter, and the other supported line's where one is installed."""
    found = [sys.executable]
    for want in ("3.11", "3.12"):
        if want == f"{sys.version_info[0]}.{sys.version_info[1]}":
            continue
        done = subprocess.run([str(REPO / ".ci" / "find-python"), want],
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode == 0 and done.stdout.strip():
            found.append(done.stdout.strip())
    return found


def _site(python: str, home: Path) -> tuple[Path, Path]:
    """A virtualenv of ``python`` without pip: its interpreter and site-packages."""
    if python == sys.executable:
        venv.create(home, with_pip=False)
    else:
        subprocess.run([python, "-m", "venv", "--without-pip", str(home)], check=True)
    inner = home / "bin" / "python"
    site = subprocess.run(
        [str(inner), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    return inner, Path(site)


@pytest.mark.parametrize("python", _pythons(), ids=lambda p: Path(p).name)
def test_every_module_but_the_test_folders_gets_its_bytecode(python, tmp_path):
    # The checkout's own path may hold a folder named tests: only folders below
    # site-packages are left out.
    inner, site = _site(python, tmp_path / "tests" / "venv")
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
