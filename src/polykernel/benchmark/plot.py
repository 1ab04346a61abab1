"""PNG bar chart of benchmark records (matplotlib, imported only when drawing).

The figure is drawn with matplotlib's object API and the Agg canvas, so it neither
needs a display nor changes the user's pyplot backend or global state. Functions
take records and a name, never a ``BenchmarkResult``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BackendUnavailableError, BenchmarkValueError
from .machine import describe_load, describe_machine
from .ranking import is_known
from .record import BenchmarkRecord

__all__ = ["bar_figure", "matplotlib_figure", "plot_png"]

_Y_FIELDS = ("mean_ms", "median_ms", "min_ms", "max_ms", "compile_ms", "throughput")
# What each plottable field is, for the y axis label.
_Y_LABELS = {
    "mean_ms": "mean time per call (ms)",
    "median_ms": "median time per call (ms)",
    "min_ms": "fastest call (ms)",
    "max_ms": "slowest call (ms)",
    "compile_ms": "first call: trace + compile (ms)",
    "throughput": "throughput",
}
_ERROR_BARS = {
    "median_ms": "error bars: interquartile range (25th to 75th percentile) of the "
    "timed calls",
    "mean_ms": "error bars: one standard deviation of the timed calls",
}


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
        xs, hs, errs, hatches = [], [], [[], []], []
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
            hatches.append("///" if rec.noisy and y in _ERROR_BARS else "")
        bars = ax.bar(xs, hs, width, yerr=errs, capsize=2, label=backend)
        for bar, hatch in zip(bars, hatches, strict=True):
            if hatch:
                bar.set_hatch(hatch)
                bar.set_edgecolor("black")
        values += hs
    return values


def _spread(rec: BenchmarkRecord, y: str, v: float) -> tuple[float, float]:
    """Error bar below/above ``v``: the IQR for medians, one std for means."""
    if y == "median_ms" and is_known(rec.p25_ms) and is_known(rec.p75_ms):
        return max(v - rec.p25_ms, 0.0), max(rec.p75_ms - v, 0.0)
    if y == "mean_ms" and is_known(rec.std_ms):
        return min(rec.std_ms, v), rec.std_ms
    return 0.0, 0.0


def _footnote(
    records: Sequence[BenchmarkRecord], y: str, env: Any, chars: int
) -> str:
    """What the bars and error bars are, which are noisy, the machine and load."""
    lines = []
    if y in _ERROR_BARS:
        what = "median" if y == "median_ms" else "mean"
        lines.append(f"Bars: {what} time per call; {_ERROR_BARS[y]}.")
        bounds = {r.noise_bound for r in records}
        bound = f"{bounds.pop():.0%} of the median" if len(bounds) == 1 else "its bound"
        if any(r.noisy for r in records):
            lines.append(f"Hatched bars are noisy: their IQR is above {bound}.")
    env = env if isinstance(env, dict) else {}
    if isinstance(env.get("machine"), dict):
        lines.append(describe_machine(env["machine"]).replace("machine: ", "Machine: "))
    if isinstance(env.get("load"), dict):
        lines.append(describe_load(env["load"]).replace("load: ", "Load: "))
    return "\n".join(textwrap.fill(line, chars) for line in lines)


def plot_png(
    records: Sequence[BenchmarkRecord],
    name: str,
    path: Path,
    y: str = "mean_ms",
    environment: dict[str, Any] | None = None,
) -> Path:
    """Draw one bar group per config and one bar per backend; save as PNG.

    Median bars carry IQR error bars, mean bars one standard deviation; noisy bars
    are hatched. The y axis (its label names the statistic and unit, and the title
    says whether lower or higher is better) is logarithmic when values span more
    than two decades. A footnote says what the error bars are and names the
    machine and the load (``environment``, as ``BenchmarkResult.environment``).

    Raises:
        ValueError: ``y`` is not a plottable field, the path does not end in
            ``.png``, or no successful record knows ``y``.
        BackendUnavailableError: matplotlib is not installed (an ImportError).

    Example:
        >>> from polykernel import BenchmarkRecord, BenchmarkResult
        >>> result = BenchmarkResult([
        ...     BenchmarkRecord("cpu", "numba", "n=1", 2.0, 0.1, 1.9, None, True, None,
        ...                     {}, {})], "doc.op")
        >>> result.plot("bench.png", y="mean_ms")
        PosixPath('bench.png')
    """
    if y not in _Y_FIELDS:
        raise BenchmarkValueError(
            f"BenchmarkResult.plot: y must be one of {_Y_FIELDS}, got {y!r}."
        )
    if path.suffix.lower() != ".png":
        raise BenchmarkValueError(f"BenchmarkResult.plot: '{path}' must end in .png.")
    fig = bar_figure(records, name, y, environment)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path


def bar_figure(
    records: Sequence[BenchmarkRecord],
    name: str,
    y: str = "mean_ms",
    environment: dict[str, Any] | None = None,
) -> Any:
    """The matplotlib ``Figure`` :func:`plot_png` saves (checked the same way)."""
    if y not in _Y_FIELDS:
        raise BenchmarkValueError(
            f"BenchmarkResult.plot: y must be one of {_Y_FIELDS}, got {y!r}."
        )
    ok = [r for r in records if r.success and is_known(getattr(r, y))]
    if not ok:
        raise BenchmarkValueError(
            f"BenchmarkResult.plot: no successful record with a known {y} to plot."
        )
    Figure, FigureCanvasAgg = matplotlib_figure()
    keys = list(dict.fromkeys((r.primitive, r.platform, r.label) for r in ok))
    backends = list(dict.fromkeys(r.backend for r in ok))
    by = {(r.primitive, r.platform, r.label, r.backend): r for r in ok}
    fig_width = max(7.0, 1.2 * len(keys) + 2)  # inches
    fig = Figure(figsize=(fig_width, 5.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    values = _draw_bars(ax, keys, backends, by, y)
    multi = len({k[0] for k in keys}) > 1
    # The primitive's last dotted part keeps labels short; tilted so none overlap.
    ticks = [f"{k[0].rsplit('.', 1)[-1]}: {k[2]}" if multi else k[2] for k in keys]
    ax.set_xticks(range(len(keys)), ticks, rotation=30, ha="right", fontsize=8)
    positive = [v for v in values if v > 0]
    log = bool(positive) and max(positive) / min(positive) > 100
    if log:
        ax.set_yscale("log")
    label = _Y_LABELS[y]
    if y == "throughput":
        units = {r.throughput_unit for r in ok if r.throughput_unit}
        label += f" ({units.pop()})" if len(units) == 1 else ""
    ax.set_ylabel(label + (", log scale" if log else ""))
    better = "higher" if y == "throughput" else "lower"
    ax.set_title(f"{name or 'polykernel benchmark'}: {better} is better")
    ax.legend(title="backend")
    note = _footnote(ok, y, environment, chars=int(fig_width * 17))
    if note:
        fig.supxlabel(note, fontsize=8, ha="left", x=0.01)
    return fig
