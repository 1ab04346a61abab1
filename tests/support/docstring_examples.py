"""The docstring examples of polykernel's source, and the rules that make them tests.

Used by ``tests/docs/test_docstring_examples.py`` (issue 29, item 4):

* every docstring of ``src/polykernel/**/*.py`` (module, class, function, method,
  property; ``__main__.py`` aside, importing it runs the command) holding a ``>>>``
  line is an example; each one runs with ``doctest`` (``ELLIPSIS`` and
  ``NORMALIZE_WHITESPACE``) in a fresh process (``docstring_runner.py``), in an
  empty directory of its own, with *empty* globals: it imports what it uses, as a
  reader who copies it has to;
* an example statement marked ``# doctest: +SKIP`` says why on that statement, in
  a comment ``(needs WHAT: WHY)``, e.g.
  ``>>> y = k(x)  # (needs a GPU: the launcher runs CUDA kernels)  # doctest: +SKIP``;
  any other skip is an error.

This module reads the source only (``ast``, ``doctest``'s parser): it imports
neither polykernel nor JAX, so a test can list the examples before running them.
"""

from __future__ import annotations

import ast
import doctest
import re
from dataclasses import dataclass
from pathlib import Path

#: ``doctest``'s option flags for every docstring example.
OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
#: The reason a skipped example must carry, in a comment on its statement.
SKIP_REASON = re.compile(r"#\s*\(needs [^:()]+: [^()]+\)")
SKIP_HELP = "# (needs WHAT: WHY)  # doctest: +SKIP, e.g. (needs a GPU: ...)"
_PROMPT = re.compile(r"^\s*>>>", re.M)
_PARSER = doctest.DocTestParser()


@dataclass(frozen=True)
class DocExample:
    """One docstring holding examples; ``name`` is doctest's (``module.Class.meth``)."""

    name: str
    module: str
    path: Path
    line: int  # 1-based line of the docstring's first line
    text: str  # the docstring, as ``inspect.getdoc`` would not clean it

    def skips_without_reason(self) -> list[tuple[int, str]]:
        """``(line, source)`` of each ``+SKIP`` statement without a ``(needs ...)``."""
        found = []
        for ex in _PARSER.get_examples(self.text):
            if ex.options.get(doctest.SKIP) and not SKIP_REASON.search(ex.source):
                found.append((self.line + ex.lineno, ex.source.splitlines()[0]))
        return found


def module_name(path: Path, src: Path) -> str:
    """``src/polykernel/a/b.py`` -> ``polykernel.a.b`` (a package: its ``__init__``)."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def docstring_examples(src: Path, package: str = "polykernel") -> list[DocExample]:
    """Every docstring with a ``>>>`` line under ``src/package``, in file order."""
    found: list[DocExample] = []
    for path in sorted((src / package).rglob("*.py")):
        if path.name == "__main__.py":
            continue
        module = module_name(path, src)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += _walk(tree, module, module, path)
    return found


def _walk(node: ast.AST, name: str, module: str, path: Path) -> list[DocExample]:
    found = []
    doc = _docstring(node)
    if doc is not None and _PROMPT.search(doc[0]):
        found.append(DocExample(name, module, path, doc[1], doc[0]))
    for child in _members(node):
        found += _walk(child, f"{name}.{child.name}", module, path)
    return found


def _members(
    node: ast.AST,
) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """The functions and classes a module or class defines (also under ``if``/``try``
    at that level); a function's own nested definitions are not doctest's."""
    if not isinstance(node, ast.Module | ast.ClassDef):
        return []
    members, todo = [], list(node.body)
    while todo:
        stmt = todo.pop(0)
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            members.append(stmt)
        elif isinstance(stmt, ast.If | ast.Try):
            todo += [*stmt.body, *stmt.orelse, *getattr(stmt, "finalbody", [])]
            for handler in getattr(stmt, "handlers", []):
                todo += handler.body
    return members


def _docstring(node: ast.AST) -> tuple[str, int] | None:
    body = getattr(node, "body", None)
    if not body or not isinstance(body[0], ast.Expr):
        return None
    value = body[0].value
    if not isinstance(value, ast.Constant) or not isinstance(value.value, str):
        return None
    return value.value, value.lineno
