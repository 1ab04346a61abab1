"""tune_allocator: applies glibc settings on Linux, rejects bad values."""

from __future__ import annotations

import sys

import pytest
from subprocess_support import run_python

import polykernel as pk


def test_applies_on_glibc_linux(run_env):
    code = "import polykernel as pk; print(pk.tune_allocator())"
    out = run_python(code=code, env=run_env)
    expected = "True" if sys.platform.startswith("linux") else "False"
    assert out.strip() == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mmap_threshold": 0}, r"mmap_threshold must be a positive number of bytes"),
        ({"trim_threshold": -5}, r"trim_threshold must be a positive number of bytes"),
        ({"mmap_threshold": True}, r"mmap_threshold must be a positive"),
        ({"mmap_threshold": 1 << 30}, r"mmap_threshold must be at most 33554432"),
    ],
)
def test_rejects_bad_thresholds(kwargs, message):
    with pytest.raises(ValueError, match=message):
        pk.tune_allocator(**kwargs)
