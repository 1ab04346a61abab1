"""The layer table of ``layers.toml``: read it, render it, and write it into
``docs/architecture.md`` (between its ``<!-- layers:begin -->`` and
``<!-- layers:end -->`` markers).

    python docs/structure/layers.py --write   # regenerate the section
    python docs/structure/layers.py           # print it

``tests/core/test_layers.py`` checks the imports against the table and that the
document holds what :func:`render` gives.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).parent
TABLE = HERE / "layers.toml"
DOCUMENT = HERE.parent / "architecture.md"
BEGIN, END = "<!-- layers:begin -->", "<!-- layers:end -->"


def layers() -> list[dict]:
    """The layers, top first: ``{"modules": [...], "role": "..."}`` each."""
    return tomllib.loads(TABLE.read_text())["layer"]


def render() -> str:
    """The Markdown of the layer table (what the document holds between markers)."""
    rows = ["| layer | modules | what they are |", "|---|---|---|"]
    for number, layer in enumerate(layers(), start=1):
        names = ", ".join(f"`{m}`" for m in layer["modules"])
        rows.append(f"| {number} | {names} | {layer['role']} |")
    return "\n".join(rows)


def section(text: str) -> str:
    """What ``text`` holds between the markers."""
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def write() -> None:
    text = DOCUMENT.read_text()
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOCUMENT.write_text(f"{head}{BEGIN}\n{render()}\n{END}{tail}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(render())
