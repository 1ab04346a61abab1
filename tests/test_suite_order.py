"""The suite's own scheduling (``conftest.LONGEST_FIRST``, issue 37 item 8)."""

from __future__ import annotations

from pathlib import Path

from suite_order import LONGEST_FIRST

ROOT = Path(__file__).resolve().parents[1]


def test_the_longest_files_listed_first_exist_and_are_listed_once():
    missing = [name for name in LONGEST_FIRST if not (ROOT / name).is_file()]
    assert missing == [], f"rename or drop them in tests/conftest.py: {missing}"
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)


def test_they_are_collected_first_in_their_order(request):
    files = list(dict.fromkeys(i.nodeid.split("::")[0] for i in request.session.items))
    collected = [name for name in files if name in LONGEST_FIRST]
    assert files[: len(collected)] == collected
    assert collected == [name for name in LONGEST_FIRST if name in collected]
