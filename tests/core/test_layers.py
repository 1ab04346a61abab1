"""The layer order of ``docs/structure/layers.toml``, checked against the imports.

Every module of ``src/polykernel`` belongs to exactly one layer; a module imports
only from its own layer or a lower one (function-level imports included, and
``from polykernel import x`` counted as importing ``x``); ``docs/architecture.md``
shows the table as :func:`render` writes it.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from source_modules import SRC, import_statements, polykernel_modules
from subprocess_support import REPO

ROOT = REPO
_spec = importlib.util.spec_from_file_location(
    "structure_layers", ROOT / "docs" / "structure" / "layers.py"
)
assert _spec is not None and _spec.loader is not None
layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(layers)


def _entry(module: str) -> str:
    """The table entry holding ``module``: ``"cli/"`` or ``"errors.py"``."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    sub = SRC / parts[0]
    return f"{parts[0]}/" if sub.is_dir() else f"{parts[0]}.py"


def _level() -> dict[str, int]:
    level: dict[str, int] = {}
    for number, layer in enumerate(layers.layers()):
        for entry in layer["modules"]:
            assert entry not in level, f"{entry} is in two layers"
            level[entry] = number
    return level


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    found = set()
    tree = ast.parse(path.read_text(), str(path))
    for base, names in import_statements(name, path, tree):
        if base is None:
            targets = names
        else:
            # `from a import b`: the module a.b when there is one, else a.
            targets = [f"{base}.{n}" if f"{base}.{n}" in known else base for n in names]
        found.update(t for t in targets if t.split(".")[0] == "polykernel")
    return found


def test_every_module_is_in_exactly_one_layer():
    level = _level()
    entries = {_entry(m) for m in polykernel_modules()}
    assert entries - set(level) == set(), "modules missing from layers.toml"
    assert set(level) - entries == set(), "layers.toml names what does not exist"


def test_no_module_imports_from_a_higher_layer():
    level, modules = _level(), polykernel_modules()
    known = set(modules)
    climbs = []
    for name, path in modules.items():
        mine = level[_entry(name)]
        for target in sorted(_imports(name, path, known)):
            while target not in known:
                target = target.rpartition(".")[0]
            if level[_entry(target)] < mine:
                climbs.append(f"{name} -> {target}")
    assert climbs == []


def test_the_architecture_document_shows_the_table():
    text = layers.DOCUMENT.read_text()
    assert layers.section(text) == layers.render(), (
        "docs/architecture.md is out of date: run "
        "`python docs/structure/layers.py --write`"
    )
