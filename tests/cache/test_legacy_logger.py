"""Logging configured under the cache store's old logger name,
``polykernel.cache_store``, still shows the store's records (issue 37): deprecated,
with one warning naming ``polykernel.cache.store``; unconfigured, the name is
ignored and the records come from ``polykernel.cache.store`` as documented."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator

import pytest

import polykernel as pk
from polykernel.cache import store


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def legacy(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Collect]:
    """The old name set up the way its users did; undone after the test."""
    monkeypatch.setattr(store, "_warned", set())
    logger = logging.getLogger(store.LEGACY_LOGGER)
    handler = _Collect()
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def test_the_old_name_gets_the_records_with_one_deprecation_warning(legacy, caplog):
    caplog.set_level(logging.DEBUG)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.compute_key({"source": "int x;"})
        store.compute_key({"source": "int y;"})
    assert [r.name for r in legacy.records] == [store.LEGACY_LOGGER] * 4
    assert legacy.records[-1].getMessage().startswith("cache key = ")
    # Handlers above both names (the root's, here caplog's) see each record once.
    assert len([r for r in caplog.records if "cache key" in r.getMessage()]) == 4
    assert [w.category for w in caught] == [pk.PolykernelDeprecationWarning]
    message = str(caught[0].message)
    assert "'polykernel.cache_store'" in message
    assert "configure 'polykernel.cache.store'" in message
    assert "polykernel 0.2" in message


def test_a_cache_problem_is_logged_under_the_old_name(legacy):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        store.cache_problem("legacy logger probe", "/nowhere")
    assert [r.getMessage() for r in legacy.records] == [
        "polykernel cache: legacy logger probe: /nowhere"
    ]


def test_the_deprecation_warning_never_breaks_a_cache_operation(legacy):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        key = store.compute_key({"source": "int x;"})
    assert len(key) == 64 and len(legacy.records) == 2


def test_without_the_old_name_configured_the_records_come_from_the_new(caplog):
    logging.getLogger(store.LEGACY_LOGGER)  # merely known: not configured
    with caplog.at_level(logging.DEBUG, logger="polykernel.cache.store"):
        store.compute_key({"source": "int x;"})
    assert {r.name for r in caplog.records} == {"polykernel.cache.store"}
