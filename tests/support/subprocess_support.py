"""Python in a fresh process, for tests that need one (import side effects, env
variables read at start-up, several processes): one helper instead of many copies."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

#: This folder (helpers and child scripts) and the repository's root.
SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parents[1]


def run_python(
    *args: str | Path,
    code: str | None = None,
    env: dict[str, str],
    timeout: float = 120,
    cwd: str | Path | None = None,
    forked: bool = False,
    kind: str = "jax",
) -> str:
    """Run ``python -c code`` or ``python *args``; assert exit 0; return stdout.
    ``forked``: in a child of the test process's ``kind`` zygote (``zygote.run``),
    for what needs no fresh interpreter of its own (``full``, which imported
    Numba too, for children that use it: the docs tests' zygote)."""
    argv = ["-c", code] if code is not None else [str(a) for a in args]
    if forked:
        import zygote

        proc = zygote.run(argv, env=env, cwd=cwd, timeout=timeout, kind=kind)
    else:
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


#: Optional packages a script or a docs page may import (``make test`` installs them
#: all; a GPU machine without network may lack one, e.g. warp-lang).
OPTIONAL_PACKAGES = ("warp", "triton", "numba")

_IMPORT = re.compile(r"^\s*(?:>>> |\.\.\. )?(import|from)\s+([^#\n]+)", re.M)


def imported(source: str) -> set[str]:
    """The top-level names ``source`` imports: ``import a.b as c, d`` and ``from
    a.b import c`` lines, doctest's ``>>>``/``...`` lines and indented ones too."""
    names = set()
    for kind, rest in _IMPORT.findall(source):
        found = rest.split(" import ")[0] if kind == "from" else rest
        for name in found.split(","):
            if words := name.split():
                names.add(words[0].split(".")[0])
    return names


def installed(package: str) -> bool:
    """Whether ``package`` can be imported here (nothing is imported)."""
    return importlib.util.find_spec(package) is not None


def missing_optional(
    source: str,
    optional: tuple[str, ...] = OPTIONAL_PACKAGES,
    needs: tuple[str, ...] = (),
) -> list[str]:
    """The packages of ``optional`` that ``source`` imports (see :func:`imported`),
    or that ``needs`` names, and are not installed."""
    wanted = imported(source) | set(needs)
    return [m for m in optional if m in wanted and not installed(m)]
