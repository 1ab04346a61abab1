"""Where a benchmark run keeps its caches (every one under a directory it owns),
and how its child processes import polykernel (:func:`user_python`).

Imported before JAX or polykernel (it imports neither), so the variables are set
before any library reads them. The same list for every script: a cache a script
forgot would leak state between runs and make cold-start figures warm.
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

#: Each cache / settings variable and its folder under the run directory.
CACHE_DIRS = {
    "POLYKERNEL_CACHE_DIR": "polykernel",
    "POLYKERNEL_CONFIG_DIR": "config",
    "NUMBA_CACHE_DIR": "numba",
    "WARP_CACHE_PATH": "warp",
    "TRITON_CACHE_DIR": "triton",
    "MPLCONFIGDIR": "mpl",
}


def cache_environment(run_dir: str | os.PathLike) -> dict[str, str]:
    """``{variable: path}`` for every cache, under ``run_dir``."""
    return {var: os.path.join(run_dir, sub) for var, sub in CACHE_DIRS.items()}


def run_directory(prefix: str) -> str:
    """A new private directory for this run's caches and files, removed when the
    process that made it exits (normally or by an exception): a benchmark leaves
    nothing in the temp dir."""
    path = tempfile.mkdtemp(prefix=prefix)
    os.chmod(path, 0o700)
    owner = os.getpid()

    def remove() -> None:
        if os.getpid() == owner:  # not in a forked child
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(remove)
    return path


@functools.cache
def _compile_polykernel() -> None:
    """Compile polykernel's bytecode (stale files only), once per benchmark run."""
    spec = importlib.util.find_spec("polykernel")  # not imported here
    if spec is not None and spec.origin is not None:
        package = os.path.dirname(spec.origin)
        subprocess.run([sys.executable, "-m", "compileall", "-q", package],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip


def user_python(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a child that should import polykernel as a user's process does.

    An installed package comes with its bytecode (``pip install`` compiles it), and
    Python reads it. Where the environment sets ``PYTHONDONTWRITEBYTECODE`` (ours
    does) and polykernel runs from a source checkout, nothing ever writes it: each
    module a child imports would be compiled from source inside the phase that
    imports it (~2 ms per module; a backend's modules on a kernel's first call), a
    cost no user pays. So polykernel's bytecode is compiled here once, as installing
    does (only stale files), and the variable is dropped for the children.
    """
    _compile_polykernel()
    found = dict(env)
    found.pop("PYTHONDONTWRITEBYTECODE", None)
    return found
