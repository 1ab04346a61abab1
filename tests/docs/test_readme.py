"""README.md opens with the two commands that work on a fresh machine, and its
times say what machine and load they were measured on (issue 37, item 8)."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).parents[2] / "README.md").read_text()


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_readme_starts_with_the_demo_and_the_test_command():
    first = README.split("```", 2)[1]
    assert first.strip().splitlines() == ["make demo", "make test"]


def test_the_suites_times_are_for_an_idle_2_core_machine():
    intro = _flat(README[: README.index("- `make demo`")])
    assert "2 cores" in intro and "idle" in intro, intro
    suite = next(_flat(p) for p in README.split("\n- ") if p.startswith("`make test`"))
    # "about N minutes on an idle 2-core machine", N at most 6 (item 8's bound).
    found = re.search(r"about (\d+) minutes on an idle 2-core machine", suite)
    assert found and int(found.group(1)) <= 6, suite
    fast = suite[suite.index("`make test-fast`") :]
    assert "on an idle 2-core machine" in fast, fast
