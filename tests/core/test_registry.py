"""The global primitive registry: registration, look-up, tags, duplicate names."""

from __future__ import annotations

import inspect
import os

import pytest

import polykernel as pk
from polykernel.core import registry
from polykernel.errors import DuplicatePrimitiveWarning


@pytest.fixture
def names():
    created: list[str] = []
    yield created
    for name in created:
        registry.unregister(name)


def _make(names: list[str], name: str) -> pk.XLACustomKernel:
    names.append(name)
    return pk.XLACustomKernel(name)


def test_kernel_registers_itself_and_lookups_work(names):
    op = _make(names, "testreg.alpha")
    assert registry.get_primitive("testreg.alpha") is op
    assert "testreg.alpha" in registry.get_all_primitive_names()
    assert registry.get_all_primitive_names() == sorted(
        registry.get_all_primitive_names()
    )
    copy = registry.get_registry()
    assert copy["testreg.alpha"] is op
    copy.clear()  # a copy: the registry itself is unchanged
    assert registry.get_primitive("testreg.alpha") is op


def test_unknown_name_lists_close_names(names):
    _make(names, "testreg.csrmv")
    with pytest.raises(
        KeyError,
        match=r"no primitive named 'testreg.csrmx'.*"
        r"Did you mean: [^?]*testreg.csrmv[^?]*\?.*import it first",
    ):
        registry.get_primitive("testreg.csrmx")
    with pytest.raises(
        KeyError,
        match=r"no primitive named 'zzzzzzzzzzzzzzzz'\. "
        r"\d+ primitives are registered",
    ):
        registry.get_primitive("zzzzzzzzzzzzzzzz")


def test_tags_subset_match_and_def_tags_replaces(names):
    a = _make(names, "testreg.tag_a")
    b = _make(names, "testreg.tag_b")
    a.def_tags("csr", "binary", "mv")
    b.def_tags("csr", "float")
    assert set(registry.get_primitives_by_tags({"csr"})) >= {
        "testreg.tag_a",
        "testreg.tag_b",
    }
    assert "testreg.tag_a" in registry.get_primitives_by_tags({"csr", "mv"})
    assert "testreg.tag_b" not in registry.get_primitives_by_tags({"csr", "mv"})
    assert "testreg.tag_b" in registry.get_primitives_by_tags("float")  # one str
    assert "testreg.tag_a" in registry.get_primitives_by_tags(set())
    a.def_tags("coo")  # replaces, does not add
    assert a.tags == ("coo",)
    assert "testreg.tag_a" not in registry.get_primitives_by_tags({"csr"})


def test_tags_must_be_strings():
    with pytest.raises(TypeError, match=r"tags must be strings, got 3"):
        registry.get_primitives_by_tags({"csr", 3})


def test_duplicate_name_warns_with_first_site_and_replaces(names):
    names.append("testreg.dup")
    first = pk.XLACustomKernel("testreg.dup")
    first_line = inspect.currentframe().f_lineno - 1
    here = os.path.basename(__file__)
    with pytest.warns(
        DuplicatePrimitiveWarning,
        match=rf"primitive 'testreg.dup' created at .*{here}:{first_line + 9} "
        rf"replaces the primitive of the same name created at .*{here}:{first_line}\b"
        r".*Give each primitive a unique name",
    ) as record:
        second = pk.XLACustomKernel("testreg.dup")
    # The warning points at the user's code, not at polykernel internals.
    assert record[0].filename == __file__
    assert registry.get_primitive("testreg.dup") is second is not first


def test_register_rejects_objects_without_a_name():
    with pytest.raises(
        TypeError,
        match=r"non-empty string 'name' attribute, got "
        r"object with name=None",
    ):
        registry.register(object())


def test_unregister():
    registry.register(type("K", (), {"name": "testreg.tmp", "tags": ()})())
    assert registry.unregister("testreg.tmp") is True
    assert registry.unregister("testreg.tmp") is False
