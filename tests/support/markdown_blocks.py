"""The Python code blocks of a Markdown page, and the conventions that make them tests.

Used by ``tests/docs/test_docs_code.py`` (README.md and every page under docs/):

* a fenced block whose info string starts with ``python``, ``py`` or ``pycon`` runs,
  **on its own**: each block in a fresh process of its own, in an empty directory
  (``docs_block_runner.py``), as a reader who copies that one block would run it. It
  imports what it uses and defines what it needs;
* or a page shares one **setup** block: ``<!-- docs-test: setup -->`` on the line
  right before its fence (it runs on its own too), and ``<!-- docs-test: after
  setup -->`` right before each later block that builds on it: such a block runs in a
  fresh process right after the setup block, as a reader who ran the setup first
  would (the page says so in its prose). At most one setup block per page; a block
  marked ``after setup`` with no setup block before it is a ``MarkupError``;
* a ```` ```text ```` block right after a ``python``/``py`` block (only blank lines
  between) is that block's expected stdout; a ``pycon`` block carries its own output
  (the lines without a ``>>>``/``...`` prompt); outputs are compared after stripping
  trailing whitespace per line and leading/trailing blank lines;
* ``<!-- docs-test: skip (REASON) -->`` on the line right before a block's fence
  keeps it from running; the reason is mandatory, and any other ``docs-test``
  comment, or one not right before a Python block, is a ``MarkupError``. A block has
  one marker at most.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RUN_LANGS = ("python", "py", "pycon")
OUTPUT_LANG = "text"
SKIP_MARKER_HELP = "<!-- docs-test: skip (REASON) -->"
MARKERS_HELP = (
    "<!-- docs-test: skip (REASON) -->, <!-- docs-test: setup --> or "
    "<!-- docs-test: after setup -->"
)

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
# A marker is a line of its own; a mention inside prose or code is not one.
_MARKER = re.compile(r"^\s*<!--.*docs-test")
_SKIP = re.compile(r"^\s*<!--\s*docs-test:\s*skip\s*\((?P<reason>.*)\)\s*-->\s*$")
_SETUP = re.compile(r"^\s*<!--\s*docs-test:\s*setup\s*-->\s*$")
_AFTER = re.compile(r"^\s*<!--\s*docs-test:\s*after setup\s*-->\s*$")
_PROMPT = re.compile(r"^(>>>|\.\.\.)(?: |$)")


class MarkupError(ValueError):
    """A page breaks the docs-test conventions (e.g. a skip marker without reason)."""


@dataclass(frozen=True)
class Fence:
    """One fenced block: ``line`` is the 1-based line of its opening fence."""

    line: int
    lang: str
    body: tuple[str, ...]  # dedented by the fence's indentation
    end_line: int  # the closing fence


@dataclass(frozen=True)
class Unit:
    """Source compiled as one piece: ``mode`` "exec" (a python block) or "single"
    (one pycon statement); its lines are the page's lines from ``line`` on."""

    line: int
    source: str
    mode: str


@dataclass(frozen=True)
class CodeBlock:
    """A Python block of a page; ``number`` counts the page's Python blocks from 1."""

    number: int
    line: int
    lang: str
    code: str
    units: tuple[Unit, ...]
    expected: str | None = None  # expected stdout, None when the page shows none
    expected_line: int | None = None
    skip_reason: str | None = None
    setup: bool = False  # the page's setup block
    after_setup: bool = False  # runs after the page's setup block

    @property
    def where(self) -> str:
        return f"block {self.number} (line {self.line})"


def fences(text: str) -> list[Fence]:
    """Every fenced block of ``text``; an unclosed fence is a ``MarkupError``."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or (m["fence"][0] == "`" and "`" in m["info"]):
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = next(
            (j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None
        )
        if end is None:
            raise MarkupError(f"line {i + 1}: fence {fence} is never closed")
        body = tuple(_dedent_line(s, indent) for s in lines[i + 1 : end])
        lang = (m["info"].split() or [""])[0].lower()
        found.append(Fence(i + 1, lang, body, end + 1))
        i = end + 1
    return found


def code_blocks(text: str) -> list[CodeBlock]:
    """The page's Python blocks with their expected output and skip markers."""
    lines = text.splitlines()
    all_fences = fences(text)
    inside = {n for f in all_fences for n in range(f.line, f.end_line + 1)}
    markers = _markers(lines, inside)
    blocks: list[CodeBlock] = []
    for k, fence in enumerate(all_fences):
        if fence.lang not in RUN_LANGS:
            continue
        kind, reason = markers.pop(fence.line - 1, (None, None))
        if kind == "setup" and any(b.setup for b in blocks):
            raise MarkupError(
                f"line {fence.line - 1}: a second docs-test setup block; a page has "
                f"one setup block at most"
            )
        if kind == "after" and not any(b.setup for b in blocks):
            raise MarkupError(
                f"line {fence.line - 1}: a block marked 'after setup' needs the "
                f"page's setup block (<!-- docs-test: setup -->) before it"
            )
        first = fence.line + 1
        if fence.lang == "pycon":
            units, expected = _pycon(fence.body, first)
            out_line = first if expected else None
        else:
            units = (Unit(first, "\n".join(fence.body) + "\n", "exec"),)
            expected, out_line = _following_output(lines, all_fences, k)
        blocks.append(
            CodeBlock(
                number=len(blocks) + 1,
                line=fence.line,
                lang=fence.lang,
                code="\n".join(fence.body),
                units=units,
                expected=expected,
                expected_line=out_line,
                skip_reason=reason,
                setup=kind == "setup",
                after_setup=kind == "after",
            )
        )
    if markers:
        line = min(markers)
        raise MarkupError(
            f"line {line}: a docs-test marker must be on the line right before "
            f"the opening fence of a ```python block"
        )
    return blocks


def normalise_output(text: str) -> str:
    """Trailing whitespace stripped per line, leading/trailing blank lines dropped."""
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def _markers(lines: list[str], inside: set[int]) -> dict[int, tuple[str, str | None]]:
    """Line -> ("skip", reason), ("setup", None) or ("after", None)."""
    markers: dict[int, tuple[str, str | None]] = {}
    for n, line in enumerate(lines, start=1):
        if n in inside or not _MARKER.match(line):
            continue
        if _SETUP.match(line):
            markers[n] = ("setup", None)
            continue
        if _AFTER.match(line):
            markers[n] = ("after", None)
            continue
        skip = _SKIP.match(line)
        if skip is None or not skip["reason"].strip():
            raise MarkupError(
                f"line {n}: {line.strip()!r} is not a valid docs-test marker; "
                f"write {MARKERS_HELP} (a skip gives the reason the block cannot "
                f"run here)"
            )
        markers[n] = ("skip", skip["reason"].strip())
    return markers


def _following_output(
    lines: list[str], all_fences: list[Fence], k: int
) -> tuple[str | None, int | None]:
    if k + 1 >= len(all_fences):
        return None, None
    fence, nxt = all_fences[k], all_fences[k + 1]
    between = lines[fence.end_line : nxt.line - 1]
    if nxt.lang != OUTPUT_LANG or any(s.strip() for s in between):
        return None, None
    return "\n".join(nxt.body), nxt.line


def _pycon(body: tuple[str, ...], first: int) -> tuple[tuple[Unit, ...], str | None]:
    units: list[Unit] = []
    output: list[str] = []
    statement: list[str] = []
    start = first

    def close() -> None:
        if statement:
            units.append(Unit(start, "\n".join(statement) + "\n", "single"))
            statement.clear()

    for n, line in enumerate(body, start=first):
        m = _PROMPT.match(line)
        if m and m[1] == "..." and statement:
            statement.append(line[4:])
        elif m and m[1] == ">>>":
            close()
            start = n
            statement.append(line[4:])
        else:
            close()
            output.append(line)
    close()
    shown = normalise_output("\n".join(output))
    return tuple(units), (shown or None)


def _dedent_line(line: str, indent: int) -> str:
    return line[min(indent, len(line) - len(line.lstrip())) :]
