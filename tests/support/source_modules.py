"""polykernel's own modules read as source: their dotted names and their imports.

Shared by the checks on the source's structure (``tests/core/test_structure.py``)
and on its layers (``tests/core/test_layers.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from subprocess_support import REPO

SRC = REPO / "src" / "polykernel"


def polykernel_modules() -> dict[str, Path]:
    """Every module of ``src/polykernel`` by dotted name (a package by its own)."""
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        found[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    return found


def import_statements(
    name: str, path: Path, tree: ast.AST
) -> Iterator[tuple[str | None, list[str]]]:
    """Each import in ``tree`` (module ``name`` at ``path``), function-level ones
    included: ``(None, modules)`` for ``import a, b``; ``(base, names)`` for ``from
    base import names``, a relative ``base`` made absolute."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield None, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                prefix = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{prefix}.{base}" if base else prefix
            yield base, [a.name for a in node.names]
