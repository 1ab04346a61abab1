"""The reference's plot(ax, x, y, hue, style, kind, show) next to our PNG form."""

from __future__ import annotations

import sys

import pytest

from polykernel.benchmark import BenchmarkRecord, BenchmarkResult


def _rec(backend, n, mean, success=True):
    return BenchmarkRecord(
        "cpu",
        backend,
        f"n={n}",
        mean,
        0.1,
        mean * 0.9,
        None,
        success,
        None if success else "boom",
        {"transpose": n > 10},
        {"n": n},
    )


@pytest.fixture
def result():
    return BenchmarkResult(
        [
            _rec("numba", 10, 1.0),
            _rec("warp", 10, 2.0),
            _rec("numba", 100, 3.0),
            _rec("warp", 100, 1.5),
            _rec("triton", 100, 0.0, success=False),
        ],
        "op",
    )


def _series(ax) -> dict[str, list[tuple[float, float]]]:
    return {
        line.get_label(): list(zip(line.get_xdata(), line.get_ydata(), strict=True))
        for line in ax.get_lines()
    }


def test_line_chart_one_series_per_hue(result):
    from matplotlib.figure import Figure

    fig = result.plot(x="label", y="mean_ms", hue="backend")
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    # Categorical x: one position per label; failed runs are not drawn.
    assert _series(ax) == {
        "numba": [(0.0, 1.0), (1.0, 3.0)],
        "warp": [(0, 2.0), (1, 1.5)],
    }
    assert [t.get_text() for t in ax.get_xticklabels()] == ["n=10", "n=100"]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == (
        "op",
        "label",
        "mean_ms",
    )


def test_numeric_x_kwargs_columns_and_defaults(result):
    fig = result.plot(x="n", y="min_ms", hue="backend", color="k")
    lines = _series(fig.axes[0])
    assert lines["warp"] == [(10.0, pytest.approx(1.8)), (100.0, pytest.approx(1.35))]
    assert all(line.get_color() == "k" for line in fig.axes[0].get_lines())
    default = result.plot()  # x defaults to the config label, one series
    assert len(default.axes[0].get_lines()) == 1
    assert default.axes[0].get_xlabel() == "label"


def test_bar_and_scatter_into_a_given_axes(result):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure()
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    assert result.plot(ax=ax, x="label", hue="backend", kind="bar") is fig
    heights = sorted(round(p.get_height(), 3) for p in ax.patches)
    assert heights == [1.0, 1.5, 2.0, 3.0]
    other = fig.add_subplot(2, 1, 2)
    result.plot(other, x="n", hue="backend", style="transpose", kind="scatter")
    assert len(other.collections) == 4  # (backend, transpose) series
    assert [t.get_text() for t in other.get_legend().get_texts()] == [
        "numba / False",
        "warp / False",
        "numba / True",
        "warp / True",
    ]


def test_chart_saved_to_a_path(result, tmp_path):
    path = result.plot(tmp_path / "chart.svg", x="label", hue="backend", kind="bar")
    assert path == tmp_path / "chart.svg" and b"<svg" in path.read_bytes()[:400]
    png = result.plot(path=tmp_path / "bars.png", y="min_ms")  # our PNG bar chart
    assert png.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(TypeError, match=r"give the file path once"):
        result.plot(tmp_path / "a.png", path=tmp_path / "b.png")


@pytest.mark.parametrize(
    "kw, match",
    [
        (
            {"kind": "pie"},
            r"kind must be one of \('line', 'bar', 'scatter'\), got 'pie'",
        ),
        ({"x": "size"}, r"x='size' is not a column of this result; columns: \["),
        ({"hue": "colour"}, r"hue='colour' is not a column"),
        ({"y": "backend"}, r"y='backend' must be a numeric column, got 'numba'"),
        ({"y": "median_ms"}, r"y='median_ms' is not a column"),
    ],
)
def test_chart_errors(result, kw, match):
    with pytest.raises(ValueError, match=match):
        result.plot(**kw)


def test_nothing_to_draw(result):
    with pytest.raises(ValueError, match=r"no successful record with a known mean_ms"):
        BenchmarkResult(result.records[-1:]).plot(x="label")


def test_chart_without_matplotlib_names_the_extra(result, monkeypatch):
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(ImportError, match=r'pip install "polykernel\[plot\]"'):
        result.plot(x="label", hue="backend")


def test_the_png_says_what_it_shows_and_where_it_ran():
    # Issue 29: units, "lower is better", what the error bars are, noisy bars
    # hatched, and the machine and load in a footnote.
    from polykernel.benchmark.plot import bar_figure

    def rec(backend, label, median, p75):
        return BenchmarkRecord("cpu", backend, label, mean_ms=median, median_ms=median,
                               p25_ms=median * 0.99, p75_ms=p75, n=20)  # fmt: skip

    records = [rec("numba", "n=1", 1.0, 1.01), rec("warp", "n=1", 2.0, 3.0)]
    env = {
        "machine": {"cpu": "Test CPU 9000", "cores": 2, "gpus": [], "versions": {}},
        "load": {"loadavg_before": [0.1] * 3, "loadavg_after": [0.2] * 3,
                 "other_cpu_share": 0.02, "cores": 2, "seconds": 5.0},
    }  # fmt: skip
    fig = bar_figure(records, "demo.op", "median_ms", env)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "median time per call (ms)"
    assert ax.get_title() == "demo.op: lower is better"
    note = " ".join(fig.get_supxlabel().split())
    assert "error bars: interquartile range (25th to 75th percentile)" in note
    assert "Hatched bars are noisy: their IQR is above 10% of the median." in note
    assert "Machine: Test CPU 9000, 2 logical CPUs, no GPU visible to JAX" in note
    assert "other processes used 2% of the 2 CPUs" in note
    hatches = [p.get_hatch() for p in ax.patches]
    assert hatches == [None, "///"]  # only warp's bar (IQR 51%) is noisy
    means = bar_figure(records, "demo.op", "mean_ms").axes[0]
    assert means.get_ylabel() == "mean time per call (ms)"
    assert "one standard deviation" in means.figure.get_supxlabel()
    rate = BenchmarkRecord("cpu", "numba", "n=1", median_ms=1.0, throughput=2e9,
                           throughput_unit="B/s")  # fmt: skip
    fast = bar_figure([rate], "demo.op", "throughput").axes[0]
    assert fast.get_ylabel() == "throughput (B/s)"
    assert fast.get_title() == "demo.op: higher is better"
