"""PNG bar chart of benchmark records (matplotlib, imported only when drawing).

The figure is drawn with matplotlib's object API and the Agg canvas, so it neither
needs a display nor changes the user's pyplot backend or global state. Functions
take records and a name, never a ``BenchmarkResult``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import BackendUnavailableError
from .ranking import is_known
from .record import BenchmarkRecord

__all__ = ["matplotlib_figure", "plot_png"]

_Y_FIELDS = ("mean_ms", "median_ms", "min_ms", "max_ms", "compile_ms", "throughput")


def matplotlib_figure():
    """``(Figure, FigureCanvasAgg)``, or an ImportError naming the ``plot`` extra."""
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
            low, high = _spread(rec, y, v)
            errs[0].append(low)
            errs[1].append(high)
        ax.bar(xs, hs, width, yerr=errs, capsize=2, label=backend)
        values += hs
    return values


def _spread(rec: BenchmarkRecord, y: str, v: float) -> tuple[float, float]:
    """Error bar below/above ``v``: the IQR for medians, one std for means."""
    if y == "median_ms" and is_known(rec.p25_ms) and is_known(rec.p75_ms):
        return max(v - rec.p25_ms, 0.0), max(rec.p75_ms - v, 0.0)
    if y == "mean_ms" and is_known(rec.std_ms):
        return min(rec.std_ms, v), rec.std_ms
    return 0.0, 0.0


def plot_png(
    records: Sequence[BenchmarkRecord], name: str, path: Path, y: str = "mean_ms"
) -> Path:
    """Draw one bar group per config and one bar per backend; save as PNG.

    Median bars carry IQR error bars, mean bars one standard deviation. The y axis
    is logarithmic when values span more than two decades.

    Raises:
        ValueError: ``y`` is not a plottable field, the path does not end in
            ``.png``, or no successful record knows ``y``.
        BackendUnavailableError: matplotlib is not installed (an ImportError).

    Example:
        >>> result.plot("bench.png", y="median_ms")  # doctest: +SKIP
    """
    if y not in _Y_FIELDS:
        raise ValueError(
            f"BenchmarkResult.plot: y must be one of {_Y_FIELDS}, got {y!r}."
        )
    if path.suffix.lower() != ".png":
        raise ValueError(f"BenchmarkResult.plot: '{path}' must end in .png.")
    ok = [r for r in records if r.success and is_known(getattr(r, y))]
    if not ok:
        raise ValueError(
            f"BenchmarkResult.plot: no successful record with a known {y} to plot."
        )
    Figure, FigureCanvasAgg = matplotlib_figure()
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
    ax.set_title(name or "polykernel benchmark")
    ax.legend(title="backend")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path
