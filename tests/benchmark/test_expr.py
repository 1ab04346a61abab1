"""compare_by expressions: what the whitelist interpreter accepts, how it reads rows."""

from __future__ import annotations

import math

import pytest

from polykernel.benchmark.expr import compile_filter

COLUMNS = ["backend", "platform", "label", "mean_ms", "transpose", "shape"]
ROW = {
    "backend": "numba",
    "platform": "cpu",
    "label": "n=10",
    "mean_ms": 2.5,
    "transpose": False,
    "shape": (10, 10),
}


@pytest.mark.parametrize(
    "expr, expected",
    [
        ("backend == 'numba'", True),
        ("backend != 'numba'", False),
        ("backend == 'numba' and platform == 'cpu'", True),
        ("backend == 'warp' or label == 'n=10'", True),
        ("not transpose", True),
        ("transpose is False", True),
        ("transpose is not None", True),
        ("backend in ('numba', 'warp')", True),
        ("backend in ['pallas']", False),
        ("backend not in {'pallas', 'warp'}", True),
        ("'umb' in backend", True),
        ("1 < mean_ms <= 2.5", True),
        ("1 < mean_ms < 2", False),
        ("mean_ms > -1", True),
        ("mean_ms >= +3", False),
        ("shape == (10, 10)", True),
        ("mean_ms < 'text'", False),  # Python cannot compare: no match, no crash
        ("(backend == 'numba') == True", True),
    ],
)
def test_expressions_read_rows(expr, expected):
    assert compile_filter(expr, COLUMNS)(ROW) is expected


def test_unknown_values_never_match_ordering():
    keep = compile_filter("mean_ms < 10", COLUMNS)
    assert keep(ROW | {"mean_ms": None}) is False
    assert keep(ROW | {"mean_ms": math.nan}) is False
    assert keep({}) is False  # a row without the column reads None


@pytest.mark.parametrize(
    "expr, what",
    [
        ("open('/etc/passwd')", "a function call"),
        ("().__class__", "attribute access"),
        ("{'a': 1}", "a dict literal"),
        ("backend if transpose else label", "a conditional expression"),
        ("(*shape,) == shape", r"unpacking \(\*\)"),
        ("b'bytes' == backend", "'Constant'"),
        ("...", "'Constant'"),
    ],
)
def test_whitelist_refuses_the_rest(expr, what):
    with pytest.raises(ValueError, match=rf"compare_by: the expression .* uses {what}"):
        compile_filter(expr, COLUMNS)


def test_statements_are_not_expressions():
    for text in ("import os", "x = 1", "del backend"):
        with pytest.raises(ValueError, match=r"is not a valid expression"):
            compile_filter(text, COLUMNS)
