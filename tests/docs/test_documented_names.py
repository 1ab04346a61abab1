"""Every ``polykernel.…`` name the docs and the README mention resolves, and the
module paths earlier releases documented still work as deprecated aliases (issue 37).

A page that names a module, a function or a method (``polykernel.cache.admin.info``,
``polykernel.XLACustomKernel.tune``) promises that the dotted path imports or is an
attribute; the aliases give one :class:`~polykernel.errors.PolykernelDeprecationWarning`
naming the new path, and plain ``import polykernel`` imports none of them.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import warnings
from pathlib import Path

import pytest
from subprocess_support import REPO, last_json, run_python

import polykernel as pk

SRC = REPO / "src" / "polykernel"
_NAME = re.compile(r"\bpolykernel(?:\.[A-Za-z_]\w*)+")

#: Dotted names in the docs that are not Python objects, each with the check that
#: it still names what the pages say.
NOT_PYTHON = {
    "polykernel.h": lambda: (SRC / "include" / "polykernel.h").is_file(),
    "polykernel.tuned_tables": lambda: (
        importlib.import_module("polykernel.dispatch.table").ENTRY_POINT_GROUP
        == "polykernel.tuned_tables"
    ),
}

#: Deprecated module path -> (where it moved, names it must still offer). The
#: CHANGELOG announces each one and the release that removes it.
ALIASES = {
    "polykernel.cache_admin": ("polykernel.cache.admin", ["info", "prune", "clear"]),
    "polykernel.shard_plan": ("polykernel.sharding.plan", ["ShardContext"]),
    "polykernel.platform_context": (
        "polykernel.contract.platform_context",
        ["lowering_for", "current_platform"],
    ),
    "polykernel.gpu": ("polykernel.launcher", ["register_gpu_kernel", "plan_batch"]),
    "polykernel.gpu.batching": ("polykernel.launcher.batching", ["plan_batch"]),
    "polykernel.gpu.layout": ("polykernel.launcher.layout", ["struct_param"]),
    "polykernel.core.dispatch": ("polykernel.dispatch", ["Dispatch", "make_key"]),
}


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _documented() -> dict[str, str]:
    """Each dotted name -> the first page that mentions it."""
    found: dict[str, str] = {}
    for page in _pages():
        for name in _NAME.findall(page.read_text()):
            found.setdefault(name, str(page.relative_to(REPO)))
    return found


def _resolve(name: str) -> object:
    """The object of a dotted name: the longest prefix that imports, then getattr."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name is not None and module.startswith(err.name):
                continue  # this prefix is no module: an attribute of a shorter one
            raise
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"{name}: no prefix imports")


def test_the_pages_name_enough_to_be_checked():
    names = _documented()
    assert len(names) > 100
    assert "polykernel.sharding.plan.ShardContext" in names
    assert "polykernel.contract.platform_context.lowering_for" in names


@pytest.mark.parametrize("name", sorted(NOT_PYTHON))
def test_a_dotted_name_that_is_no_object_still_names_what_it_says(name):
    assert name in _documented()
    assert NOT_PYTHON[name]()


def test_every_name_the_docs_and_readme_mention_resolves():
    broken = {}
    for name, page in sorted(_documented().items()):
        if name in NOT_PYTHON:
            continue
        try:
            with warnings.catch_warnings():
                # A page may name a deprecated alias; its warning is pinned below.
                warnings.simplefilter("ignore", pk.PolykernelDeprecationWarning)
                _resolve(name)
        except (ImportError, AttributeError) as err:
            broken[name] = f"{page}: {type(err).__name__}: {err}"
    assert broken == {}


def _forget(monkeypatch: pytest.MonkeyPatch, old: str) -> None:
    """Make ``import old`` run the alias afresh (the package above a submodule
    too: it gives the warning); the monkeypatch puts the modules back after."""
    for alias in sorted(ALIASES, reverse=True):  # a submodule before its package
        related = old == alias or old.startswith(f"{alias}.")
        if alias in sys.modules and (related or alias.startswith(f"{old}.")):
            parent, _, child = alias.rpartition(".")
            monkeypatch.delattr(sys.modules[parent], child, raising=False)
            monkeypatch.delitem(sys.modules, alias)


@pytest.mark.parametrize("old", sorted(ALIASES))
def test_an_old_module_path_works_with_one_warning_naming_the_new(old, monkeypatch):
    new, names = ALIASES[old]
    _forget(monkeypatch, old)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(f"import {old}", __file__, "exec"), {})
    assert [w.category for w in caught] == [pk.PolykernelDeprecationWarning]
    assert issubclass(pk.PolykernelDeprecationWarning, DeprecationWarning)
    message = str(caught[0].message)
    assert re.search(rf"\b{re.escape(new)}\b(?!\.)", message), message
    assert "removed in polykernel 0.2" in message
    # It points at the line that imported, not at the alias or importlib.
    assert caught[0].filename == __file__
    module, target = sys.modules[old], importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(target, name), name


def test_every_alias_is_announced_in_the_changelog_with_its_removal():
    unreleased = (REPO / "CHANGELOG.md").read_text().split("\n## ")[1]
    assert [old for old in ALIASES if f"`{old}`" not in unreleased] == []
    assert "`polykernel.cache_store`" in unreleased  # the logger's old name
    assert re.search(r"removed in (polykernel )?0\.2\b", unreleased)


_PROBE = f"""
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import polykernel
print(json.dumps({{
    "modules": [m for m in {sorted(ALIASES)!r} if m in sys.modules],
    "warnings": [str(w.message) for w in caught if "polykernel" in str(w.message)],
}}))
"""


def test_importing_polykernel_imports_no_alias_and_warns_nothing(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    report = last_json(run_python(code=_PROBE, env=env, cwd=tmp_path))
    assert report == {"modules": [], "warnings": []}
