"""`import polykernel` imports no optional package and creates no file or directory."""

from __future__ import annotations

import ast
import os

from subprocess_support import REPO, last_json, run_python

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


def _init_tree() -> ast.Module:
    return ast.parse((REPO / "src" / "polykernel" / "__init__.py").read_text())


def _imported(nodes: list[ast.stmt]) -> dict[str, str]:
    """``{public name: module}`` of the ``from .x import y as y`` statements."""
    found = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name != "*" and alias.asname == alias.name:
                    found[alias.name] = "." * node.level + (node.module or "")
    return found


def test_public_names_are_listed_once_and_the_lists_agree():
    import polykernel as pk
    from polykernel import errors

    tree = _init_tree()
    eager = _imported(tree.body)
    (mirror,) = [n for n in tree.body if isinstance(n, ast.If)]  # TYPE_CHECKING
    lazy_typed = _imported(mirror.body)
    # The lazy table and its TYPE_CHECKING mirror name the same things.
    assert lazy_typed == pk._LAZY
    # A name comes from one place: an import, the lazy table or errors.__all__.
    assert not set(eager) & set(pk._LAZY)
    assert not set(eager) & set(errors.__all__)
    assert len(pk.__all__) == len(set(pk.__all__))
    assert set(pk.__all__) == set(eager) | set(pk._LAZY) | set(errors.__all__)
    # errors.__all__ is every class errors.py and warning_types.py define.
    defined = {
        n.name
        for module in ("errors.py", "warning_types.py")
        for n in ast.parse((REPO / "src/polykernel" / module).read_text()).body
        if isinstance(n, ast.ClassDef)
    }
    aliases = {n for n in errors.__all__ if getattr(errors, n).__name__ != n}
    assert set(errors.__all__) - aliases == defined
