"""PNG bar chart of a ``BenchmarkResult`` (matplotlib, imported only here).

The figure is drawn with matplotlib's object API and the Agg canvas, so it neither
needs a display nor changes the user's pyplot backend or global state.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import BackendUnavailableError

if TYPE_CHECKING:
    from .result import BenchmarkResult

__all__ = ["plot_result"]

_Y_FIELDS = ("median_ms", "mean_ms", "min_ms", "compile_ms", "throughput")


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise BackendUnavailableError(
            "BenchmarkResult.plot needs matplotlib, which is not installed. "
            'Install it with: pip install "polykernel[plot]"'
        ) from err
    return Figure, FigureCanvasAgg


def _draw_bars(ax, keys, backends, by, y) -> list[float]:
    width = 0.8 / len(backends)
    values = []
    for i, backend in enumerate(backends):
        xs, hs, errs = [], [], [[], []]
        for j, key in enumerate(keys):
            rec = by.get((*key, backend))
            if rec is None:
                continue
            v = float(getattr(rec, y))
            xs.append(j + (i - (len(backends) - 1) / 2) * width)
            hs.append(v)
            iqr = y == "median_ms" and rec.p25_ms is not None and rec.p75_ms is not None
            errs[0].append(max(v - rec.p25_ms, 0.0) if iqr else 0.0)
            errs[1].append(max(rec.p75_ms - v, 0.0) if iqr else 0.0)
        ax.bar(xs, hs, width, yerr=errs, capsize=2, label=backend)
        values += hs
    return values


def plot_result(
    result: BenchmarkResult, path: str | Path, y: str = "median_ms"
) -> Path:
    """Draw one bar group per config and one bar per backend; save as PNG.

    Median bars carry IQR error bars. The y axis is logarithmic when values span
    more than two decades.

    Raises:
        ValueError: ``y`` is not a plottable field, the path does not end in
            ``.png``, or no record succeeded.
        BackendUnavailableError: matplotlib is not installed.

    Example:
        >>> result.plot("bench.png")  # doctest: +SKIP
    """
    path = Path(path)
    if y not in _Y_FIELDS:
        raise ValueError(
            f"BenchmarkResult.plot: y must be one of {_Y_FIELDS}, got {y!r}."
        )
    if path.suffix.lower() != ".png":
        raise ValueError(f"BenchmarkResult.plot: '{path}' must end in .png.")
    ok = [r for r in result.records if r.success and getattr(r, y) is not None]
    if not ok:
        raise ValueError("BenchmarkResult.plot: no successful record to plot.")
    Figure, FigureCanvasAgg = _matplotlib()
    keys = list(dict.fromkeys((r.primitive, r.platform, r.label) for r in ok))
    backends = list(dict.fromkeys(r.backend for r in ok))
    by = {(r.primitive, r.platform, r.label, r.backend): r for r in ok}
    fig = Figure(figsize=(max(6.0, 1.2 * len(keys) + 2), 4.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    values = _draw_bars(ax, keys, backends, by, y)
    multi = len({k[0] for k in keys}) > 1
    # The primitive's last dotted part keeps labels short; tilted so none overlap.
    ticks = [f"{k[0].rsplit('.', 1)[-1]}: {k[2]}" if multi else k[2] for k in keys]
    ax.set_xticks(range(len(keys)), ticks, rotation=30, ha="right", fontsize=8)
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 100:
        ax.set_yscale("log")
    ax.set_ylabel(y.replace("_ms", " (ms per call)"))
    ax.set_title(result.primitive_name or "polykernel benchmark")
    ax.legend(title="backend")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path
