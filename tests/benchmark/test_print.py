"""BenchmarkResult built the reference way (mean only) and every print() keyword."""

from __future__ import annotations

import math

import pytest

from polykernel.benchmark import BenchmarkRecord, BenchmarkResult


def _ref(backend, label, mean, transpose=False, platform="gpu", **kw):
    """A record exactly as the reference's docs build one: eleven fields, no median."""
    fields = {
        "platform": platform,
        "backend": backend,
        "label": label,
        "mean_ms": mean,
        "std_ms": 0.01,
        "min_ms": mean * 0.9,
        "throughput": None,
        "success": True,
        "error": None,
        "kernel_kwargs": {"transpose": transpose},
        "data_kwargs": {"nnz": 100},
    }
    return BenchmarkRecord(**(fields | kw))


@pytest.fixture
def result():
    return BenchmarkResult(
        [
            _ref("numba", "small", 3.0, platform="cpu"),
            _ref("pallas", "small", 0.5),
            _ref("warp", "small", 0.6),
            _ref("numba", "large", 40.0, platform="cpu"),
            _ref("pallas", "large", 2.0),
            _ref("warp", "large", 1.6),
            _ref(
                "triton",
                "large",
                math.nan,
                std_ms=math.nan,
                min_ms=math.nan,
                success=False,
                error="RuntimeError: PTX failed\nsecond line",
            ),
        ],
        primitive_name="spmv",
    )


def _printed(capsys, result, **kw) -> list[str]:
    result.print(**kw)
    return capsys.readouterr().out.splitlines()


def _row(lines, *cells) -> str:
    """The one line whose '|'-separated cells include all of ``cells``."""
    hits = [
        line
        for line in lines
        if all(c in [p.strip() for p in line.split("|")] for c in cells)
    ]
    assert len(hits) == 1, (cells, lines)
    return hits[0]


def _cell(lines, line, column) -> str:
    """Text of ``column`` in ``line`` ('' on rule lines between groups)."""
    header = [c.strip() for c in lines[1].split("|")]
    cells = [c.strip() for c in line.split("|")]
    return cells[header.index(column)] if len(cells) == len(header) else ""


def test_mean_only_records_rank_print_and_query(result):
    assert result.fastest().backend == "pallas"
    assert result.fastest(label="large").backend == "warp"
    assert result.fastest("nope") is None
    assert BenchmarkResult([result.records[-1]]).fastest() is None  # only a failure
    per = {k: r.backend for k, r in result.fastest_per_config().items()}
    assert per == {("spmv", "small"): "pallas", ("spmv", "large"): "warp"}
    text = str(result)
    assert text.splitlines()[0] == "spmv: mean ms per call (speed-up vs baseline)"
    assert "(times are means: not every record has a median)" in text
    assert "FAILED spmv [gpu] large / triton: RuntimeError: PTX failed" in text
    assert "second line" not in text
    # Two platforms: the table names them per row.
    large = next(line for line in text.splitlines() if "gpu      | large" in line)
    assert "| 1.6 *" in large and "| 2  " in large


def test_rank_by_median_only_when_every_record_has_one():
    with_median = _ref("a", "x", 5.0, median_ms=1.0)
    mean_only = _ref("b", "x", 2.0)
    # Mixed: means rank (a's mean 5 > b's mean 2), never median vs mean.
    assert BenchmarkResult([with_median, mean_only]).fastest().backend == "b"
    both = [_ref("a", "x", 5.0, median_ms=1.0), _ref("b", "x", 2.0, median_ms=3.0)]
    assert BenchmarkResult(both).fastest().backend == "a"
    # A record with only a median still ranks when the means rank.
    median_only = BenchmarkRecord("cpu", "c", "x", median_ms=0.5)
    assert BenchmarkResult([mean_only, median_only]).fastest().backend == "c"
    unknown = BenchmarkRecord("gpu", "d", "x")  # success, but nothing measured
    assert BenchmarkResult([unknown]).fastest() is None
    table = BenchmarkResult([unknown, mean_only]).table()
    assert [c.strip() for c in table.splitlines()[3].split("|")] == ["x", "nan", "2 *"]


def test_records_property_is_a_copy(result):
    records = result.records
    records.clear()
    assert len(result.records) == 7 and len(result) == 7
    result.records.append(_ref("extra", "x", 1.0))
    assert len(result) == 7
    for _ in result:  # iterating a result never exposes its own list
        break
    assert result.records is not result.records
    with pytest.raises(TypeError, match=r"record 1 is a int \(3\); every record"):
        BenchmarkResult([_ref("a", "x", 1.0), 3])


def test_default_print_is_the_comparison_table(result, capsys):
    assert _printed(capsys, result) == str(result).splitlines()
    no_marks = _printed(capsys, result, highlight_best=False)
    assert not any(line.rstrip().endswith("*") for line in no_marks[2:5])
    assert "0.5 (1.20x) *" in "\n".join(_printed(capsys, result, baseline="warp"))


def test_sort_by_column_or_columns(result, capsys):
    lines = _printed(capsys, result, sort_by="mean_ms")
    assert lines[0] == "BenchmarkResult: spmv"
    assert [c.strip() for c in lines[1].split("|")][:3] == [
        "platform",
        "backend",
        "transpose",
    ]
    header = [c.strip() for c in lines[1].split("|")]
    assert header[-1] == "error" and "speedup" not in header
    means = [_cell(lines, line, "mean_ms") for line in lines[3:]]
    assert means == ["0.5", "0.6", "1.6", "2", "3", "40", "FAILED"]
    failed = _row(lines, "triton")
    assert _cell(lines, failed, "std_ms") == "—"
    assert _cell(lines, failed, "error") == "RuntimeError: PTX failed"
    by_two = _printed(capsys, result, sort_by=["label", "mean_ms"])
    assert [_cell(by_two, line, "backend") for line in by_two[3:]] == [
        "warp",
        "pallas",
        "numba",
        "triton",
        "pallas",
        "warp",
        "numba",
    ]


def test_group_by_marks_the_fastest_of_each_group(result, capsys):
    lines = _printed(capsys, result, group_by="label", highlight_best=True)
    marked = [line for line in lines[3:-2] if _cell(lines, line, "best") == "*"]
    assert [_cell(lines, line, "backend") for line in marked] == ["pallas", "warp"]
    assert lines[-1] == "* fastest in its group (by mean_ms)"
    plain = _printed(capsys, result, group_by="label", highlight_best=False)
    assert "best" not in plain[1]
    two = _printed(capsys, result, group_by=["platform", "label"])
    stars = [line for line in two[3:-2] if _cell(two, line, "best") == "*"]
    assert len(stars) == 4  # numba is alone (hence best) on cpu for both labels


def test_compare_by_expression_per_config_and_single_anchor(result, capsys):
    lines = _printed(capsys, result, sort_by="mean_ms", compare_by="backend == 'numba'")
    assert _cell(lines, _row(lines, "pallas", "small"), "speedup") == "6.00x"
    assert _cell(lines, _row(lines, "warp", "large"), "speedup") == "25.00x"
    assert _cell(lines, _row(lines, "triton"), "speedup") == "—"
    assert lines[-1] == "speed-up = baseline mean_ms / row mean_ms (> 1: faster)"
    anchor = _printed(
        capsys, result, compare_by="backend == 'numba' and label == 'small'"
    )
    assert _cell(anchor, _row(anchor, "numba", "large"), "speedup") == "0.07x"
    assert _cell(anchor, _row(anchor, "pallas", "large"), "speedup") == "1.50x"
    called = _printed(
        capsys,
        result,
        compare_by=lambda row: row.get("backend") == "warp",
        sort_by="speedup",
    )
    assert _cell(called, called[3], "backend") == "numba"  # slowest vs warp first
    xplat = _printed(capsys, result, compare_by="platform == 'cpu' and not transpose")
    assert _cell(xplat, _row(xplat, "pallas", "small"), "speedup") == "6.00x"
    with pytest.raises(
        ValueError,
        match=r"compare_by=\"backend == 'cuda'\" selects no row of this result",
    ):
        result.print(compare_by="backend == 'cuda'")


@pytest.mark.parametrize(
    "expr, what",
    [
        ("__import__('os').system('true')", "a function call"),
        ("backend.upper() == 'NUMBA'", "a function call"),
        ("backend.__class__ == str", "attribute access"),
        ("label[0] == 's'", "indexing"),
        ("mean_ms * 2 > 1", "arithmetic"),
        ("(lambda: 1)()", "a function call"),
        ("[x for x in label]", "a comprehension"),
        ("f'{backend}' == 'numba'", "an f-string"),
        ("(n := 1)", r"an assignment \(:=\)"),
    ],
)
def test_compare_by_refuses_code(result, expr, what):
    with pytest.raises(
        ValueError,
        match=rf"BenchmarkResult.print: compare_by: the expression .* uses {what}, "
        r"which is not allowed; allowed: column names",
    ):
        result.print(compare_by=expr)


def _bad(id: str, method: str, keywords: dict, error: type, match: str):
    """A row: ``result.<method>(**keywords)`` raises ``error`` matching ``match``."""
    return pytest.param(method, keywords, error, match, id=id)


LONG_EXPRESSION = "backend == 'a'" + " or label == 'b'" * 75
COMPARE_BY_ERRORS = [
    _bad("unknown-name", "print", {"compare_by": "os == 1"}, ValueError,
         r"names 'os', which is not a column of this result; columns: "
         r"\['backend', 'error', 'label'"),
    _bad("not-an-expression", "print", {"compare_by": "backend =="}, ValueError,
         r"'backend ==' is not a valid expression"),
    _bad("too-long", "print", {"compare_by": LONG_EXPRESSION}, ValueError,
         rf"is {len(LONG_EXPRESSION)} characters long; the limit is 1000"),
    _bad("too-deep", "print", {"compare_by": "not " * 60 + "transpose"}, ValueError,
         r"nests more than 50 levels deep"),
    _bad("not-a-string", "print", {"compare_by": 3}, TypeError,
         r"compare_by must be an expression string"),
]  # fmt: skip
KEYWORD_AND_COLUMN_ERRORS = [
    _bad("print-unknown-keywords", "print", {"sortby": "mean_ms", "colour": "red"},
         TypeError, r"BenchmarkResult.print got unexpected keyword argument\(s\) "
         r"'sortby' \(did you mean 'sort_by'\?\), 'colour'; it takes sort_by, "
         r"group_by"),
    _bad("table-unknown-keyword", "table", {"hue": "backend"}, TypeError,
         r"BenchmarkResult.table got unexpected"),
    _bad("print-sort_by-column", "print", {"sort_by": "median"}, ValueError,
         r"sort_by names 'median', which is not a column of this result; "
         r"columns: \['platform', 'backend', 'transpose', 'nnz', 'label'"),
    _bad("table-sort_by-column", "table", {"sort_by": "x"}, ValueError,
         r"^BenchmarkResult.table: sort_by names 'x'"),
    _bad("print-compare_by-column", "print", {"compare_by": "x == 1"}, ValueError,
         r"^BenchmarkResult.print: compare_by: the"),
    _bad("order_by-column", "print", {"order_by": ["shape", "backend"]}, ValueError,
         r"order_by names 'shape'"),
    _bad("group_by-type", "print", {"group_by": 3}, TypeError,
         r"group_by must be a column name or a non-empty"),
    _bad("vary_by-empty", "print", {"vary_by": []}, TypeError,
         r"vary_by must be a column name"),
    _bad("speedup_vs-type", "print",
         {"order_by": ["label", "backend"], "speedup_vs": 1}, TypeError,
         r"speedup_vs must be a backend name \(str\)"),
    _bad("baseline-without-compare", "print",
         {"sort_by": "mean_ms", "baseline": "numba"}, TypeError,
         r"baseline= belongs to the default comparison"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "keywords", "error", "match"), COMPARE_BY_ERRORS)
def test_compare_by_other_errors(result, method, keywords, error, match):
    with pytest.raises(error, match=match):
        getattr(result, method)(**keywords)


def test_compare_by_nesting_within_the_limit_prints(result):
    result.print(compare_by="not " * 49 + "transpose")  # within the limit


def test_order_by_hierarchy_with_speedup(result, capsys):
    lines = _printed(capsys, result, order_by=["label", "backend"], speedup_vs="numba")
    header = [c.strip() for c in lines[1].split("|")]
    assert header[:3] == ["label", "backend", "platform"]
    assert header[-3:] == ["vs_numba", "best", "error"]
    body = lines[3:]
    assert body[0].startswith("large") and body[1].startswith("     ")
    assert set(body[4]) <= {"-", "+"}  # a rule between the label groups
    warp_large = _row(lines, "warp", "1.6")
    assert _cell(lines, warp_large, "vs_numba") == "25.00x"
    assert _cell(lines, warp_large, "best") == "*"
    assert _cell(lines, _row(lines, "pallas", "0.5"), "best") == "*"
    plain = _printed(
        capsys, result, order_by=["label", "backend"], highlight_best=False
    )
    assert "best" not in plain[1]
    # order_by wins over vary_by (and over sort_by/group_by), as in the reference.
    both = _printed(capsys, result, order_by=["label", "backend"], vary_by="backend")
    assert both[1].startswith("label")


def test_vary_by_groups_everything_else(result, capsys):
    lines = _printed(capsys, result, vary_by="backend", speedup_vs="pallas")
    header = [c.strip() for c in lines[1].split("|")]
    assert header[:5] == ["platform", "transpose", "nnz", "label", "backend"]
    # platform is part of the group: cpu/numba rows form their own groups.
    assert _cell(lines, _row(lines, "warp", "0.6"), "vs_pallas") == "0.83x"
    assert _cell(lines, _row(lines, "numba", "3"), "vs_pallas") == "—"
    rules = [line for line in lines[3:] if line and set(line) <= {"-", "+"}]
    assert len(rules) == 3  # four groups: (cpu|gpu) x (large|small)
    two = _printed(capsys, result, vary_by=["platform", "backend"])
    assert [c.strip() for c in two[1].split("|")][:5] == [
        "transpose",
        "nnz",
        "label",
        "platform",
        "backend",
    ]
    stars = [line for line in two[3:-2] if _cell(two, line, "best") == "*"]
    assert len(stars) == 4  # one per (label, platform) sub-group, as the reference


def test_speedup_vs_in_the_flat_table(result, capsys):
    lines = _printed(capsys, result, speedup_vs="warp")
    assert _cell(lines, _row(lines, "pallas", "2"), "vs_warp") == "0.80x"
    assert _cell(lines, _row(lines, "numba", "3"), "vs_warp") == "0.20x"
    with pytest.raises(
        ValueError,
        match=r"speedup_vs='cuda' is not a value of the 'backend' column "
        r"\(values: \['numba', 'pallas', 'warp', 'triton'\]\)",
    ):
        result.print(speedup_vs="cuda")


@pytest.mark.parametrize(
    ("method", "keywords", "error", "match"), KEYWORD_AND_COLUMN_ERRORS
)
def test_keyword_and_column_errors(result, method, keywords, error, match):
    with pytest.raises(error, match=match):
        getattr(result, method)(**keywords)


def test_our_fields_and_kwarg_clashes_get_columns(capsys):
    timings = {"mean_ms": 2.0, "median_ms": 1.5, "p25_ms": 1.0, "p75_ms": 2.0}
    rec = BenchmarkRecord(
        "cpu", "numba", "x", **timings, compile_ms=30.0, throughput=2e9,
        throughput_unit="B/s", kernel_kwargs={"label": "k", "n": 3},
        data_kwargs={"n": 4},
    )  # fmt: skip
    lines = _printed(capsys, BenchmarkResult([rec], "op"), sort_by="n")
    header = [c.strip() for c in lines[1].split("|")]
    assert header == [
        "platform", "backend", "kernel_kwargs.label", "n", "data_kwargs.n",
        "label", "mean_ms", "std_ms", "min_ms", "median_ms", "iqr_ms", "compile_ms",
        "throughput",
    ]  # fmt: skip
    cells = [c.strip() for c in lines[3].split("|")]
    assert cells[2:] == ["k", "3", "4", "x", "2", "—", "—", "1.5", "1", "30", "2 GB/s"]


def test_empty_and_multi_primitive_results(capsys):
    assert _printed(capsys, BenchmarkResult([], "op"), sort_by="label") == [
        "BenchmarkResult: op: (no benchmark records)"
    ]
    two = BenchmarkResult([_ref("a", "x", 1.0, primitive="p.one"), _ref("a", "x", 2.0)])
    two = BenchmarkResult.combine(
        [two, BenchmarkResult([_ref("b", "y", 1.0)], "p.two")]
    )
    lines = _printed(capsys, two, group_by="label")
    assert lines[0] == "BenchmarkResult" and lines[1].startswith("primitive")
