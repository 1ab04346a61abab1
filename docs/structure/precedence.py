"""Dispatch's precedence as the docs state it: rendered from its one statement,
``src/polykernel/dispatch/precedence.py``, into every page that states it (between
``<!-- precedence:begin -->`` and ``<!-- precedence:end -->`` markers).

    python docs/structure/precedence.py --write   # regenerate the sections
    python docs/structure/precedence.py           # print it

``tests/dispatch/test_precedence.py`` checks that every page holds what
:func:`render` gives and that the code applies the levels in this order. The
module is loaded from its file: neither polykernel nor JAX needs to be importable.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
SOURCE = ROOT / "src" / "polykernel" / "dispatch" / "precedence.py"
#: The pages that state the precedence.
PAGES = (ROOT / "docs" / "tuning.md", ROOT / "docs" / "index.md", ROOT / "README.md")
BEGIN, END = "<!-- precedence:begin -->", "<!-- precedence:end -->"


def render() -> str:
    """The precedence, as :func:`polykernel.dispatch.precedence.render` gives it."""
    spec = importlib.util.spec_from_file_location("_pk_precedence", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module.render()


def section(text: str) -> str:
    """What ``text`` holds between the markers."""
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def write() -> None:
    block = render()
    for page in PAGES:
        text = page.read_text()
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        page.write_text(f"{head}{BEGIN}\n{block}\n{END}{tail}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(render())
