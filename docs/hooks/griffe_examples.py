"""A Griffe extension for the API reference: polykernel's docstring conventions.

- polykernel's docstrings (Google style) title their runnable doctests ``Example:``;
  Griffe's Google parser knows only the plural as the section whose ``>>>`` lines it
  renders as code (the singular would be an admonition of plain text).
- Cross-references in Sphinx's roles (``:func:`name```, ``:class:`~a.B```) become
  plain code (```name```, ```B```): Markdown has no such roles.
- A module-level attribute documented by ``#:`` comment lines right above it (the
  Sphinx convention ``polykernel.types`` uses) gets them as its docstring.
- An attribute a class documents in its docstring's ``Attributes:`` section is
  listed there only: the site shows no member without a docstring of its own
  (``show_if_no_docstring: false``), and one that has a docstring as well is
  reported (a warning, so ``mkdocs build --strict`` fails): document it in one place.
  (The member stays in Griffe's tree: the section's type column is read from it.)

The docstring text is changed in memory, for the docs build only.
"""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^Example:[ \t]*$", re.MULTILINE)
_ROLE = re.compile(
    r":(?:func|meth|class|mod|attr|data|exc|obj):`~?(?:[\w.]*\.)?([^`.]+)`"
)
_COMMENT = re.compile(r"^\s*#:\s?(.*)$")
_ATTRIBUTES = re.compile(r"^(\s*)Attributes:\s*$")
_ENTRY = re.compile(r"^(\w+)\s*(?:\(.*\))?:")
logger = logging.getLogger("mkdocs.plugins.griffe_examples")


class ExampleSections(griffe.Extension):
    """Rename ``Example:`` sections; Sphinx roles to code; ``#:`` comments; no
    attribute listed twice."""

    def __init__(self) -> None:
        super().__init__()
        self._lines: dict[Path, list[str]] = {}

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = _EXAMPLE.sub("Examples:", obj.docstring.value)
            obj.docstring.value = _ROLE.sub(r"`\1`", text)

    def on_attribute_instance(
        self,
        *,
        node: ast.AST | griffe.ObjectNode,
        attr: griffe.Attribute,
        **kwargs: Any,
    ) -> None:
        if attr.docstring is not None or attr.lineno is None:
            return
        if not isinstance(attr.parent, griffe.Module) or not attr.filepath:
            return
        path = Path(str(attr.filepath))
        lines = self._lines.setdefault(path, path.read_text().splitlines())
        comment: list[str] = []
        n = attr.lineno - 2  # the line above the assignment, 0-based
        while n >= 0 and (m := _COMMENT.match(lines[n])):
            comment.insert(0, m[1])
            n -= 1
        if comment:
            attr.docstring = griffe.Docstring(
                "\n".join(comment), lineno=n + 2, endlineno=attr.lineno - 1,
                parent=attr,
            )  # fmt: skip

    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        for name in _documented_attributes(cls):
            member = cls.members.get(name)
            if not isinstance(member, griffe.Attribute):
                continue
            if member.docstring is not None:
                logger.warning(
                    "%s: attribute %r is documented twice, in the class's "
                    "Attributes: section and by its own docstring; keep one",
                    cls.path,
                    name,
                )


def _documented_attributes(cls: griffe.Class) -> list[str]:
    """The names of the class docstring's ``Attributes:`` section (Google style)."""
    if cls.docstring is None:
        return []
    names, indent = [], None
    for line in cls.docstring.value.splitlines():
        if indent is None:
            if m := _ATTRIBUTES.match(line):
                indent = len(m[1])
            continue
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break  # the section ended
        stripped = line.strip()
        body = len(line) - len(line.lstrip()) == indent + 4
        if body and (m := _ENTRY.match(stripped)):
            names.append(m[1])
    return names
