"""Dispatch's precedence: every pair of levels, in the code and in the docs.

Each level is set up on its own primitive — the call's ``backend=``, ``set_backend``,
``set_default``, a tuned entry, a saved default, the registered default — each
pointing at a backend of its own that returns a value of its own; for every pair of
levels present together, the higher one decides (the decision says so, and the
compiled call returns its backend's value).
"""

from __future__ import annotations

import importlib.util
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dispatch_support import entry, spec
from subprocess_support import REPO

import polykernel as pk
from polykernel.dispatch import LEVELS, Scope
from polykernel.dispatch.precedence import Reason, level_of, render
from polykernel.dispatch.writing import record_entries

#: level number -> the backend that level points at (all registered on the cpu).
BACKEND = {1: "by_call", 2: "by_pref", 3: "by_setdef", 4: "by_tuned", 5: "by_saved",
           6: "by_registration"}  # fmt: skip
_ids = itertools.count()


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))
    yield
    pk.clear_backends()


def _op() -> pk.XLACustomKernel:
    op = pk.XLACustomKernel(f"precedence.op{next(_ids)}")
    for level in sorted(BACKEND, reverse=True):  # by_registration first: default
        value = float(level)
        op.def_kernel(
            BACKEND[level], "cpu", lambda outs, v=value, **kw: lambda x: x + v
        )
    return op


def _set_up(op: pk.XLACustomKernel, levels: set[int]) -> str | None:
    """Put ``levels`` in place on ``op``; return the call's ``backend=``."""
    entries = []
    if 4 in levels:
        entries.append(entry(op, (10,), BACKEND[4], {}))
    if 5 in levels:
        entries.append(entry(op, None, BACKEND[5], {}, scope=Scope.SAVED))
    if entries:
        record_entries(entries)
    if 3 in levels:
        op.set_default("cpu", BACKEND[3])
    if 2 in levels:
        pk.set_backend("cpu", BACKEND[2])
    return BACKEND[1] if 1 in levels else None


def _check(levels: set[int]) -> None:
    op = _op()
    backend = _set_up(op, levels)
    winner = min(levels | {6})
    d = op.dispatch(spec(), outs=spec(), platform="cpu", backend=backend)
    assert d.backend == BACKEND[winner]
    assert d.level == winner and level_of(d.reason).number == winner
    got = jax.jit(lambda x: op(x, outs=spec(), backend=backend))(jnp.zeros(1000))
    np.testing.assert_array_equal(np.asarray(got), np.full(1000, float(winner)))


@pytest.mark.parametrize(
    ("high", "low"), list(itertools.combinations(sorted(BACKEND), 2)),
    ids=lambda n: f"L{n}",
)  # fmt: skip
def test_of_every_two_levels_the_higher_decides(high, low):
    _check({high, low})


@pytest.mark.parametrize("level", sorted(BACKEND))
def test_each_level_alone_decides(level):
    _check({level})


def test_all_levels_at_once_the_call_decides():
    _check(set(BACKEND))


def test_the_levels_are_numbered_once_and_give_every_reason_once():
    assert [level.number for level in LEVELS] == list(range(1, len(LEVELS) + 1))
    given = [r for level in LEVELS for r in level.reasons]
    assert sorted(given) == sorted(Reason) and len(given) == len(set(given))


def _pages():
    path = REPO / "docs" / "structure" / "precedence.py"
    spec_ = importlib.util.spec_from_file_location("precedence_pages", path)
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


def test_every_page_that_states_the_precedence_shows_it_as_the_code_has_it():
    pages = _pages()
    assert pages.render() == render()
    for page in pages.PAGES:
        assert pages.section(page.read_text()) == render(), (
            f"{page} is out of date: run `python docs/structure/precedence.py --write`"
        )


def test_no_other_page_restates_the_order():
    """The old one-line statements of the order are gone from every page (they
    went stale three times)."""
    stale = ("call > `set_backend`", "saved tuned default, then the first")
    for page in [*(REPO / "docs").glob("*.md"), REPO / "README.md"]:
        text = page.read_text()
        assert not any(s in text for s in stale), page
