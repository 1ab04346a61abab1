"""`import polykernel` imports no optional package and creates no file or directory."""

from __future__ import annotations

import os

from subprocess_support import last_json, run_python

OPTIONAL = [
    "numba",
    "warp",
    "triton",
    "numba_cuda",
    "torch",
    "llvmlite",
    "matplotlib",
    "scipy",
]

PROBE = f"""
import json, sys
import polykernel
names = sorted(polykernel.__dir__())
print(json.dumps({{"loaded": [m for m in {OPTIONAL!r} if m in sys.modules],
                  "names": names}}))
"""


def test_import_is_free_of_optional_packages_and_disk_writes(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("POLYKERNEL_", "XDG_", "NUMBA_CACHE"))
    }
    env.update(
        HOME=str(home),
        JAX_PLATFORMS="cpu",
        POLYKERNEL_CACHE_DIR=str(tmp_path / "cache"),
        POLYKERNEL_CONFIG_DIR=str(tmp_path / "config"),
    )
    report = last_json(run_python(code=PROBE, env=env, cwd=tmp_path))
    assert report["loaded"] == []
    assert "XLACustomKernel" in report["names"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"]
    assert list(home.iterdir()) == []


def test_all_lists_every_public_name_and_each_resolves():
    import polykernel as pk
    from polykernel import errors

    # Every re-exported and lazy function or class is in __all__ (submodules and
    # the helpers of __init__ itself, such as typing's names, are not).
    ours = {
        n
        for n in pk.__dir__()
        if not n.startswith("_")
        and str(getattr(getattr(pk, n), "__module__", "")).startswith("polykernel")
    }
    assert ours <= set(pk.__all__)
    assert set(errors.__all__) <= set(pk.__all__)
    assert {"backends", "config", "testing"} <= set(pk.__all__)
    assert all(getattr(pk, name) is not None for name in pk.__all__)
