"""A Griffe extension for the API reference: two spellings of polykernel's docstrings.

- polykernel's docstrings (Google style) title their runnable doctests ``Example:``;
  Griffe's Google parser knows only the plural as the section whose ``>>>`` lines it
  renders as code (the singular would be an admonition of plain text).
- Cross-references in Sphinx's roles (``:func:`name```, ``:class:`~a.B```) become
  plain code (```name```, ```B```): Markdown has no such roles.

The docstring text is changed in memory, for the docs build only.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_EXAMPLE = re.compile(r"^Example:[ \t]*$", re.MULTILINE)
_ROLE = re.compile(
    r":(?:func|meth|class|mod|attr|data|exc|obj):`~?(?:[\w.]*\.)?([^`.]+)`"
)


class ExampleSections(griffe.Extension):
    """Rename ``Example:`` sections to ``Examples:``; Sphinx roles to code."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            text = _EXAMPLE.sub("Examples:", obj.docstring.value)
            obj.docstring.value = _ROLE.sub(r"`\1`", text)
