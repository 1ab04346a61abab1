"""Warm-start tests in new processes: watching what a process starts, and
lowering the catalog's ``scaled_add`` for CUDA in a new process.

:func:`watch_processes` is imported by the children themselves (put this folder on
their ``sys.path``); :func:`lower_in_a_new_process` by the tests that run
``tests/launcher/warm_start_child.py``, as a child of the test process's ``jax``
zygote (``zygote.py``): it imported NumPy, JAX and polykernel and no compiler
package, so the child imports Triton or Numba and numba-cuda itself, as a fresh
process would, and what it reports started or imported is its own.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from subprocess_support import last_json, run_python

SUPPORT = Path(__file__).resolve().parent
WARM_START_CHILD = SUPPORT.parent / "launcher" / "warm_start_child.py"


def watch_processes(started: list[str]) -> None:
    """Record every process this one starts from now on (``subprocess.Popen``,
    ``os.system``, ``os.posix_spawn*``) in ``started``."""
    real_popen = subprocess.Popen.__init__

    def popen(self, args, *rest, **kw):
        started.append(str(args if isinstance(args, str) else args[0]))
        real_popen(self, args, *rest, **kw)

    subprocess.Popen.__init__ = popen  # type: ignore[method-assign]

    def spy(name, real):
        def call(*args, **kw):
            started.append(f"{name} {args[0]}")
            return real(*args, **kw)

        return call

    for name in ("system", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, spy(name, getattr(os, name)))


def lower_in_a_new_process(backend: str, env: dict[str, str]) -> dict:
    """Run the warm-start child for ``backend`` (``triton`` or ``numba_cuda``);
    the JSON line it printed."""
    out = run_python(WARM_START_CHILD, backend, env=env, timeout=600, forked=True)
    return last_json(out)
