"""Cache settings: ``POLYKERNEL_CACHE_LOCKING``'s spellings, ``prune``'s limits.

``LOCKING``: the usual spellings of off and on in any case (one parser,
``config.env_flag``); anything else keeps locks on after one warning naming the
variable, the value and what it accepts. ``PRUNE_LIMITS``: a ``bool`` (or a string,
or a float of bytes) is refused where an int is documented, naming the parameter,
what it expected and what it got.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import polykernel as pk
from polykernel.cache import admin as cache_admin
from polykernel.cache.locks import LOCKING_ENV, entry_lock, locking_enabled
from polykernel.settings import paths as config

UNKNOWN = (
    r"\$POLYKERNEL_CACHE_LOCKING={value!r} is not an on/off value; using the default "
    r"\(on\)\. Set it to one of 0, false, no, off \(off\) or 1, true, yes, on \(on\), "
    r"in any case\."
)


@pytest.fixture(autouse=True)
def fresh_flags(monkeypatch):
    monkeypatch.setattr(config, "_flags_warned", set())


LOCKING = [
    *[(v, False) for v in ("0", "false", "False", "FALSE", "no", "No", "off", "OFF",
                           " off ", "\tfalse\n")],
    *[(v, True) for v in ("1", "true", "True", "yes", "YES", "on", "On", "", "  ")],
]  # fmt: skip


@pytest.mark.parametrize(("value", "enabled"), LOCKING)
def test_locking_accepts_the_usual_spellings(monkeypatch, tmp_path, value, enabled):
    monkeypatch.setenv(LOCKING_ENV, value)
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path))
    assert locking_enabled() is enabled  # filterwarnings=error: no warning
    with entry_lock(tmp_path / "section", "a" * 40) as held:
        assert held is enabled
    assert (tmp_path / "section" / "locks").exists() is enabled


def test_locking_unset_is_on(monkeypatch):
    monkeypatch.delenv(LOCKING_ENV, raising=False)
    assert locking_enabled() is True


@pytest.mark.parametrize("value", ["disable", "maybe", "2", "-1", "nope", "of"])
def test_an_unknown_locking_value_warns_once_and_keeps_locks_on(monkeypatch, value):
    monkeypatch.setenv(LOCKING_ENV, value)
    with pytest.warns(pk.CacheWarning, match=UNKNOWN.format(value=value)) as seen:
        assert locking_enabled() is True
    assert len(seen) == 1
    assert locking_enabled() is True  # once per value and process


def test_env_flag_is_the_one_parser(monkeypatch):
    monkeypatch.setenv("POLYKERNEL_TEST_FLAG", "Yes")
    assert config.env_flag("POLYKERNEL_TEST_FLAG", default=False) is True
    monkeypatch.setenv("POLYKERNEL_TEST_FLAG", "sure")
    with pytest.warns(pk.PolykernelWarning, match=r"using the default \(off\)"):
        assert config.env_flag("POLYKERNEL_TEST_FLAG", default=False) is False


def _bad(id: str, kwargs: dict, exc: type[Exception], match: str):
    return pytest.param(kwargs, exc, match, id=id)


PRUNE_LIMITS = [
    _bad("bytes-true", {"max_bytes": True}, pk.KernelTypeError,
         r"max_bytes must be a non-negative int, got True \(bool\)\. Pass e\.g\. "
         r"max_bytes=2\*\*30 \(bytes\), or None for no limit"),
    _bad("bytes-false", {"max_bytes": False}, pk.KernelTypeError,
         r"max_bytes must be a non-negative int, got False \(bool\)"),
    _bad("bytes-float", {"max_bytes": 1.5}, pk.KernelTypeError,
         r"max_bytes must be a non-negative int, got 1\.5 \(float\)"),
    _bad("bytes-str", {"max_bytes": "1G"}, pk.KernelTypeError,
         r"max_bytes must be a non-negative int, got '1G' \(str\)"),
    _bad("bytes-numpy-bool", {"max_bytes": np.True_}, pk.KernelTypeError,
         r"max_bytes must be a non-negative int, got .*True.* \(bool"),
    _bad("bytes-negative", {"max_bytes": -1}, ValueError,
         r"max_bytes must be a non-negative int, got -1\. Pass e\.g\."),
    _bad("age-true", {"max_age": True}, pk.KernelTypeError,
         r"max_age must be a non-negative number of seconds, got True \(bool\)\. "
         r"Pass e\.g\. max_age=7 \* 86400 \(a week\)"),
    _bad("age-str", {"max_age": "1d"}, pk.KernelTypeError,
         r"max_age must be a non-negative number of seconds, got '1d' \(str\)"),
    _bad("age-nan", {"max_age": math.nan}, ValueError,
         r"max_age must be a non-negative number of seconds, got nan"),
    _bad("age-negative", {"max_age": -5}, ValueError,
         r"max_age must be a non-negative number of seconds, got -5"),
]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "exc", "match"), PRUNE_LIMITS)
def test_prune_refuses_limits_of_the_wrong_type(tmp_path, monkeypatch, kwargs, exc,
                                                match):  # fmt: skip
    root = tmp_path / "root"
    (root / "native" / ("a" * 40)).mkdir(parents=True)
    (root / "native" / ("a" * 40) / "lib.so").write_bytes(b"x" * 10)
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(root))
    with pytest.raises(exc, match=match) as raised:
        cache_admin.prune(**kwargs)
    if exc is pk.KernelTypeError:  # our TypeError, and the ValueError it was before
        assert isinstance(raised.value, TypeError)
        assert isinstance(raised.value, ValueError)
    assert (root / "native" / ("a" * 40) / "lib.so").exists()  # nothing pruned


@pytest.mark.parametrize(
    "kwargs",
    [{"max_bytes": np.int64(10**9)}, {"max_age": np.float32(1e9)}, {"max_age": 10}],
)
def test_prune_takes_numpy_numbers(tmp_path, monkeypatch, kwargs):
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path / "root"))
    assert cache_admin.prune(**kwargs) == 0
