"""The site's search finds an API entry by its full name: a query such as
``XLACustomKernel.tune`` matches the entry titled ``polykernel.XLACustomKernel.tune``
(the search index splits words at dots, as the site's search does with its query)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _separator() -> re.Pattern[str]:
    text = (REPO / "mkdocs.yml").read_text()
    found = re.search(r"^\s+separator: '([^']+)'", text, re.MULTILINE)
    assert found, "mkdocs.yml: the search plugin sets no separator"
    return re.compile(found.group(1))


def _tokens(text: str) -> set[str]:
    return {t.lower() for t in _separator().split(text) if t}


def _api_titles() -> list[str]:
    """Every API entry's title: the object each ``::: name`` directive documents."""
    return [
        m.group(1)
        for page in sorted((REPO / "docs" / "api").glob("*.md"))
        for m in re.finditer(r"^::: (\S+)", page.read_text(), re.MULTILINE)
    ]


@pytest.mark.parametrize(
    "query, title",
    [
        ("XLACustomKernel.tune", "polykernel.XLACustomKernel.tune"),
        ("XLACustomKernel.def_benchmark_data",
         "polykernel.XLACustomKernel.def_benchmark_data"),
        ("explain_dispatch", "polykernel.explain_dispatch"),
        ("tuning.TuneReport", "polykernel.tuning.TuneReport"),
    ],
)  # fmt: skip
def test_a_full_name_finds_its_api_entry(query: str, title: str):
    assert title in _api_titles()
    assert _tokens(query) <= _tokens(title)


def test_every_api_entry_is_found_by_its_name_without_the_package():
    for title in _api_titles():
        query = title.removeprefix("polykernel.")
        assert _tokens(query) <= _tokens(title), title


def test_versions_stay_whole():
    assert "0.10" in _tokens("JAX 0.10 and 0.12")
