"""The reference's ``plot(ax, x, y, hue, style, kind, show)``: a chart, not a file.

Columns are those of the row tables (record fields plus one per keyword argument).
Only matplotlib is needed (the reference also wanted pandas, and seaborn when
present). Without ``ax`` and ``show`` the figure is built off pyplot with the Agg
canvas, so drawing never touches the user's pyplot state; ``show=True`` uses pyplot.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import BenchmarkValueError
from .plot import matplotlib_figure
from .ranking import is_known
from .record import BenchmarkRecord
from .rows import Row, build_rows

__all__ = ["KINDS", "plot_chart"]

KINDS = ("line", "bar", "scatter")
_MARKERS = ("o", "s", "^", "D", "v", "x", "P", "*")


def _check(columns: list[str], x: str, y: str, hue, style, kind: str) -> None:
    if kind not in KINDS:
        raise BenchmarkValueError(
            f"BenchmarkResult.plot: kind must be one of {KINDS}, got {kind!r}."
        )
    for name, col in (("x", x), ("y", y), ("hue", hue), ("style", style)):
        if col is not None and col not in columns:
            raise BenchmarkValueError(
                f"BenchmarkResult.plot: {name}={col!r} is not a column of this "
                f"result; columns: {columns}."
            )


def _points(rows: list[Row], x: str, y: str) -> list[Row]:
    ok = [r for r in rows if r.record.success and r.values.get(y) is not None]
    bad = [r.values[y] for r in ok if not is_known(r.values[y])]
    if bad and not all(isinstance(v, float) for v in bad):  # NaN is fine, text is not
        raise BenchmarkValueError(
            f"BenchmarkResult.plot: y={y!r} must be a numeric column, got {bad[0]!r}."
        )
    ok = [r for r in ok if is_known(r.values[y])]
    if not ok:
        raise BenchmarkValueError(
            f"BenchmarkResult.plot: no successful record with a known {y} to plot."
        )
    return ok


def _positions(rows: list[Row], x: str) -> tuple[dict[Any, float], list[str] | None]:
    values = list(dict.fromkeys(r.values.get(x) for r in rows))
    known = [v for v in values if is_known(v)]
    if len(known) == len(values):
        return {v: float(v) for v in known}, None
    return {v: float(i) for i, v in enumerate(values)}, [str(v) for v in values]


def _series(rows: list[Row], hue, style) -> dict[tuple, list[Row]]:
    groups: dict[tuple, list[Row]] = {}
    for r in rows:
        key = (
            r.values.get(hue) if hue else None,
            r.values.get(style) if style else None,
        )
        groups.setdefault(key, []).append(r)
    return groups


def _means(
    rows: list[Row], pos: dict[Any, float], x: str, y: str
) -> dict[float, float]:
    sums: dict[float, list[float]] = {}
    for r in rows:
        sums.setdefault(pos[r.values.get(x)], []).append(float(r.values[y]))
    return {p: sum(v) / len(v) for p, v in sorted(sums.items())}


def _draw(ax, rows, x, y, hue, style, kind, kwargs) -> None:
    pos, ticks = _positions(rows, x)
    groups = _series(rows, hue, style)
    styles = list(dict.fromkeys(k[1] for k in groups))
    width = 0.8 / len(groups)
    for i, ((h, s), members) in enumerate(groups.items()):
        label = " / ".join(str(v) for v in (h, s) if v is not None) or None
        means = _means(members, pos, x, y)
        xs, ys = list(means), list(means.values())
        marker = _MARKERS[styles.index(s) % len(_MARKERS)] if style else None
        if kind == "bar":
            shift = (i - (len(groups) - 1) / 2) * width
            ax.bar([p + shift for p in xs], ys, width, label=label, **kwargs)
        elif kind == "scatter":
            ax.scatter(xs, ys, label=label, marker=marker, **kwargs)
        else:
            ax.plot(xs, ys, label=label, marker=marker or "o", **kwargs)
    if ticks is not None:
        ax.set_xticks(range(len(ticks)), ticks, rotation=30, ha="right")
    if hue or style:
        ax.legend()


def plot_chart(
    records: Sequence[BenchmarkRecord],
    name: str,
    ax: Any = None,
    x: str | None = None,
    y: str = "mean_ms",
    hue: str | None = None,
    style: str | None = None,
    kind: str = "line",
    show: bool = False,
    **kwargs: Any,
) -> Any:
    """Draw ``y`` against ``x`` (default ``'label'``), one series per ``hue`` value.

    Repeated ``(x, series)`` points are averaged; ``style`` picks markers; extra
    keywords go to matplotlib's ``plot``/``bar``/``scatter``. Returns the Figure.

    Raises:
        ValueError: unknown ``kind`` or column, non-numeric ``y``, nothing to plot.
        BackendUnavailableError: matplotlib is not installed (an ImportError).
    """
    x = "label" if x is None else x
    columns, rows = build_rows(list(records))
    _check(columns, x, y, hue, style, kind)
    points = _points(rows, x, y)
    Figure, FigureCanvasAgg = matplotlib_figure()  # the clear ImportError first
    if ax is None and show:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(10, 6))
    elif ax is None:
        fig = Figure(figsize=(10, 6))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    _draw(ax, points, x, y, hue, style, kind, kwargs)
    ax.set_title(name or "Benchmark")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if show:
        import matplotlib.pyplot as plt

        plt.show()
    return fig
