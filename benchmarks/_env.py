"""Where a benchmark run keeps its caches: every one under a directory it owns.

Imported before JAX or polykernel (it imports neither), so the variables are set
before any library reads them. The same list for every script: a cache a script
forgot would leak state between runs and make cold-start figures warm.
"""

from __future__ import annotations

import os

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
