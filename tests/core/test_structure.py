"""The structure the backend contract rests on, checked on the source itself.

- XLA targets are registered in one module: ``jax.ffi.register_ffi_target`` is
  called from ``polykernel/ffi/targets.py`` only;
- generic code never compares a backend's name: only the backend table
  (``backends/__init__.py``) and each backend's own package may;
- one platform vocabulary: the platform tables and conversions live in
  ``platforms.py``;
- no import cycles among polykernel's modules (function-level imports included);
- the loaders take a typed request, not ``dict(locals())``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from source_modules import SRC, import_statements, polykernel_modules

BACKENDS = ("numba", "numba_cuda", "warp", "pallas", "triton", "cuda_raw", "jax_raw")


def _modules() -> Iterator[tuple[str, Path, ast.Module]]:
    for name, path in polykernel_modules().items():
        yield name, path, ast.parse(path.read_text(), str(path))


def _owner(path: Path) -> str | None:
    """The backend whose package holds ``path`` (None: generic code)."""
    parts = path.relative_to(SRC).parts
    if len(parts) > 2 and parts[0] == "backends" and parts[1] in BACKENDS:
        return parts[1]
    return None


def test_register_ffi_target_is_called_from_the_registry_only():
    callers = []
    for _name, path, tree in _modules():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "register_ffi_target"
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "ffi"
            ):
                callers.append(str(path.relative_to(SRC)))
    assert callers == ["ffi/targets.py"]


def _compared_names(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            values = operand.elts if isinstance(operand, ast.Tuple | ast.List |
                                                ast.Set) else [operand]  # fmt: skip
            for value in values:
                if isinstance(value, ast.Constant) and value.value in BACKENDS:
                    found.add(value.value)
    return found


def test_no_backend_name_is_compared_outside_the_table_and_its_own_package():
    offenders = {}
    for _name, path, tree in _modules():
        rel = path.relative_to(SRC).as_posix()
        if rel == "backends/__init__.py":
            continue
        names = _compared_names(tree) - {_owner(path)}
        if names:
            offenders[rel] = sorted(names)
    assert offenders == {}


def test_platform_conversions_live_in_one_module():
    inline = re.compile(
        r'"CUDA" if|\(\s*"gpu",\s*"cuda"|\(\s*"cuda",\s*"rocm"\)|"rocm":\s*"gpu"'
    )
    offenders = [
        str(path.relative_to(SRC))
        for _name, path, _tree in _modules()
        if path.name != "platforms.py" and inline.search(path.read_text())
    ]
    assert offenders == []


def _imports(name: str, path: Path, tree: ast.Module, known: set[str]) -> set[str]:
    found = set()
    for base, names in import_statements(name, path, tree):
        targets = names if base is None else [base] + [f"{base}.{n}" for n in names]
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def test_there_is_no_import_cycle():
    modules = list(_modules())
    known = {name for name, _, _ in modules}
    graph = {name: _imports(name, path, tree, known) for name, path, tree in modules}
    # A package's __init__ re-exporting its own submodules is not a cycle.
    for name in graph:
        graph[name] = {t for t in graph[name] if not t.startswith(f"{name}.")}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_loaders_take_a_typed_request_not_locals():
    offenders = [
        str(path.relative_to(SRC))
        for _name, path, _tree in _modules()
        if "locals()" in path.read_text()
    ]
    assert offenders == []
