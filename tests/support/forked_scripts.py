"""Child scripts forked by the test process's ``full`` zygote (``zygote.py``).

For the sharding and docstring children (``vmap_sharding_child.py``,
``sharding_scenarios.py``, ``sharding_properties.py``): each still runs as ``python
SCRIPT`` in a process of its own with no JAX backend started, so the device count
it sets in ``XLA_FLAGS`` before its first JAX call is the one XLA reads, but it
skips importing NumPy, JAX, Numba and polykernel (about 0.8 s of CPU a child on the
2-core test machine), which the zygote of this pytest-xdist worker, shared with the
docs tests, did once.
"""

from __future__ import annotations

from pathlib import Path

from zygote import run_script


def run_forked(script: Path, *args: str, env: dict[str, str], timeout: float) -> str:
    """``python script *args`` forked by the zygote; assert exit 0; return stdout."""
    proc = run_script(script, *args, env=env, timeout=timeout)
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    )
    return proc.stdout
