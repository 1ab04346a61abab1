"""Where a benchmark run keeps its caches: every one under a directory it owns.

Imported before JAX or polykernel (it imports neither), so the variables are set
before any library reads them. The same list for every script: a cache a script
forgot would leak state between runs and make cold-start figures warm.
"""

from __future__ import annotations

import atexit
import os
import shutil
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
