"""Records flattened into table rows, and how a cell is written.

One row per record; the columns follow the reference's flat table (platform, backend,
one column per keyword argument, label, mean/std/min) plus what we measure beyond it
(median and IQR, compile time, throughput) and an ``error`` column when a run failed.
Columns nobody has a value for are left out, so a reference-built result prints like
the reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .ranking import is_known, rank_field, rank_ms
from .record import BenchmarkRecord

__all__ = [
    "METRIC_COLUMNS",
    "Row",
    "build_rows",
    "format_cell",
    "format_si",
    "sort_key",
]

# Columns that measure rather than describe a run: never part of a group key.
METRIC_COLUMNS = frozenset(
    {
        "mean_ms",
        "std_ms",
        "min_ms",
        "median_ms",
        "iqr_ms",
        "compile_ms",
        "throughput",
        "speedup",
        "error",
        "best",
    }
)
_RESERVED = METRIC_COLUMNS | {"primitive", "platform", "backend", "label", "best"}
_MEASURED = METRIC_COLUMNS - {"speedup", "error"}
_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_UNKNOWN = "—"
_ERROR_WIDTH = 70


@dataclass
class Row:
    """One record as a row: column values, the time it ranks by, the record."""

    values: dict[str, Any]
    time: float | None
    record: BenchmarkRecord


def is_metric(column: str) -> bool:
    """Whether ``column`` holds a measurement (incl. ``vs_<backend>`` speed-ups)."""
    return column in METRIC_COLUMNS or column.startswith("vs_")


def format_si(value: float, unit: str) -> str:
    """Format ``value`` with an SI prefix and 4 significant figures.

    Example:
        >>> from polykernel.benchmark.rows import format_si
        >>> format_si(12_345_678, "B/s")
        '12.35 MB/s'
    """
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _kwarg_columns(records: Sequence[BenchmarkRecord]) -> list[tuple[str, str, str]]:
    """``(column, source attribute, key)`` for every keyword-argument key."""
    taken = set(_RESERVED)
    out = []
    for attr in ("kernel_kwargs", "data_kwargs"):
        keys = sorted({str(k) for r in records for k in getattr(r, attr)})
        for key in keys:
            # A key that clashes with a record column keeps its own column.
            column = f"{attr}.{key}" if key in taken else key
            taken.add(column)
            out.append((column, attr, key))
    return out


def build_rows(records: Sequence[BenchmarkRecord]) -> tuple[list[str], list[Row]]:
    """Flatten ``records`` into ``(columns, rows)``; values stay raw (unformatted).

    Example:
        >>> from polykernel.benchmark.rows import build_rows
        >>> from polykernel import BenchmarkRecord
        >>> cols, rows = build_rows([BenchmarkRecord("cpu", "a", "x", mean_ms=1.0)])
        >>> cols
        ['platform', 'backend', 'label', 'mean_ms', 'std_ms', 'min_ms']
    """
    field = rank_field(records)
    kwarg_cols = _kwarg_columns(records)
    prims = {r.primitive for r in records if r.primitive}
    head = (["primitive"] if len(prims) > 1 else []) + ["platform", "backend"]
    tail = ["label", "mean_ms", "std_ms", "min_ms"]
    if any(is_known(r.median_ms) for r in records):
        tail += ["median_ms", "iqr_ms"]
    for name in ("compile_ms", "throughput"):
        if any(is_known(getattr(r, name)) for r in records):
            tail.append(name)
    if any(not r.success for r in records):
        tail.append("error")
    columns = head + [c for c, _, _ in kwarg_cols] + tail
    rows = []
    own = [c for c in columns if c not in {k for k, _, _ in kwarg_cols}]
    for r in records:
        values: dict[str, Any] = {c: getattr(r, c) for c in own}
        for column, attr, key in kwarg_cols:
            found = {str(k): v for k, v in getattr(r, attr).items()}
            values[column] = found.get(key)
        if not r.success:  # whatever a failed run holds there was never measured
            values.update({c: None for c in columns if c in _MEASURED})
        rows.append(Row(values, rank_ms(r, field), r))
    return columns, rows


def sort_key(value: Any) -> tuple:
    """Numbers first (ascending), then text; unknown (``None``/NaN) last."""
    if isinstance(value, bool):
        return (0, int(value), "")
    if isinstance(value, int | float):
        return (2, 0, "") if math.isnan(value) else (0, value, "")
    if value is None:
        return (2, 0, "")
    return (1, 0, str(value))


def _number(value: float) -> str:
    return "nan" if math.isnan(value) else f"{value:.4g}"


def format_cell(column: str, value: Any, record: BenchmarkRecord) -> str:
    """Text of one cell: ``FAILED``/``—``/``nan`` where a value is not known."""
    if column == "mean_ms" and not record.success:
        return "FAILED"
    if column == "error":
        first = (value or "").strip().splitlines()
        text = first[0] if first else ("unknown error" if not record.success else "")
        return text if len(text) <= _ERROR_WIDTH else text[: _ERROR_WIDTH - 1] + "…"
    if value is None:
        return _UNKNOWN if is_metric(column) else ""
    if column == "speedup" or column.startswith("vs_"):
        return f"{value:.2f}x"
    if column == "throughput" and record.throughput_unit and is_known(value):
        return format_si(value, record.throughput_unit)
    if isinstance(value, float):
        return _number(value)
    return str(value)
