"""The API reference is organised by task and lists every public name once (issue 29).

The pages of ``docs/api/`` name the objects they document with mkdocstrings'
``::: identifier`` lines; ``mkdocs build`` renders them (``make docs``, which needs
its own virtualenv). These tests read the pages and the package's ``__all__`` lists
statically, so they run with the suite: every name of ``polykernel.__all__`` and of
``polykernel.testing.__all__`` has exactly one page, under its public path; the
exception classes are the ``polykernel.errors`` page's; the backend protocol is on
the backend authors' page only; ``XLACustomKernel`` opens the primitive's page; and
the site's navigation lists every page.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from subprocess_support import REPO

API = REPO / "docs" / "api"
SRC = REPO / "src" / "polykernel"
_DIRECTIVE = re.compile(r"^:::\s+(\S+)\s*$", re.M)
#: Names of polykernel.__all__ documented by a page of their own, not one directive.
MODULE_PAGES = {"backends": "backend.md", "config": "config.md", "testing": None}
NOT_DOCUMENTED = {"__version__"}


def dunder_all(path: Path) -> list[str]:
    """The ``__all__`` list of a module, read from its source."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", None) == "__all__" for t in targets):
                assert node.value is not None
                return list(ast.literal_eval(node.value))
    raise AssertionError(f"{path} has no __all__")


def directives() -> dict[str, list[str]]:
    """Page file name -> its ``::: identifier`` lines, in order."""
    return {p.name: _DIRECTIVE.findall(p.read_text()) for p in sorted(API.glob("*.md"))}


def test_every_public_name_has_one_entry_under_its_public_path():
    pages = directives()
    documented = Counter(ident for idents in pages.values() for ident in idents)
    errors = set(dunder_all(SRC / "errors.py"))
    missing, twice = [], []
    for name in dunder_all(SRC / "__init__.py"):
        if name in NOT_DOCUMENTED or name in MODULE_PAGES:
            continue
        if name in errors:  # the polykernel.errors page lists them
            assert documented[f"polykernel.{name}"] == 0, name
            continue
        count = documented[f"polykernel.{name}"]
        (missing if count == 0 else twice if count > 1 else []).append(name)
    for name in dunder_all(SRC / "testing" / "__init__.py"):
        count = documented[f"polykernel.testing.{name}"]
        (missing if count == 0 else twice if count > 1 else []).append(name)
    assert not missing, f"no page documents {missing}"
    assert not twice, f"documented more than once: {twice}"
    assert documented["polykernel.errors"] == 1
    assert not [i for i, n in documented.items() if n > 1]


def test_no_page_names_an_internal_module():
    """Public paths only: ``polykernel.core...``, ``polykernel.contract...`` move."""
    public = ("polykernel.testing", "polykernel.errors", "polykernel.types")
    public += ("polykernel.config", "polykernel.backends", "polykernel.catalog")
    public += ("polykernel.tuning", "polykernel.benchmark")  # the reference's path
    for page, idents in directives().items():
        for ident in idents:
            head = ".".join(ident.split(".")[:2])
            top_level = ident.count(".") == 1 or ident.startswith("polykernel.XLA")
            assert top_level or head in public, f"{page}: {ident}"


def test_pages_are_by_task_and_the_primitive_comes_first():
    pages = directives()
    assert set(pages) == {
        "index.md",
        "primitive.md",
        "kernels.md",
        "native.md",
        "transformations.md",
        "export.md",
        "tuning.md",
        "config.md",
        "benchmarking.md",
        "errors.md",
        "types.md",
        "backend.md",
        "catalog.md",
    }
    assert pages["primitive.md"][0] == "polykernel.XLACustomKernel"
    protocol = {"polykernel.Backend", "polykernel.BackendKernel"}
    for page, idents in pages.items():
        assert page == "backend.md" or not protocol & set(idents), page
    assert protocol <= set(pages["backend.md"])


def test_the_navigation_lists_every_api_page_in_the_index_order():
    nav = re.findall(
        r"^\s+- [^:\n]+: (api/\w+\.md)$", (REPO / "mkdocs.yml").read_text(), re.M
    )
    index = re.findall(r"\]\((\w+\.md)\)", (API / "index.md").read_text())
    assert nav == [f"api/{name}" for name in index]
    assert {p.name for p in API.glob("*.md")} == {"index.md", *index}
