"""The reference's row tables: flat (sort/group), ``order_by`` and ``vary_by``.

Every function takes records and a name, never a ``BenchmarkResult``, so this module
sits below the result class. The fastest row of a group is marked ``*`` and speed-ups
are ``baseline time / row time``, both by the time the records rank by (the median
when every successful record has one, else the mean).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import BenchmarkValueError
from .expr import compile_filter
from .options import PrintOptions
from .ranking import rank_field
from .rows import Row, build_rows, format_cell, is_metric, sort_key

__all__ = ["format_rows"]

_SEP, _RULE = " | ", "-+-"


def _key(row: Row, columns: Sequence[str]) -> tuple:
    return tuple(sort_key(row.values.get(c)) for c in columns)


def _best_ids(rows: list[Row], group_of: Callable[[Row], tuple]) -> set[int]:
    best: dict[tuple, Row] = {}
    for row in rows:
        if row.time is None:
            continue
        key = group_of(row)
        current = best.get(key)
        if current is None or current.time is None or row.time < current.time:
            best[key] = row
    return {id(r) for r in best.values()}


def _speedups(rows, column, is_base, group_of, anchor_single=False) -> None:
    """Add ``column`` = base time / row time, the base taken from the row's group.

    With ``anchor_single``, a lone baseline row anchors every row (the reference's
    "single anchor" use of ``compare_by``, e.g. ``"backend == 'a' and label == 'x'"``).
    """
    bases = [r for r in rows if is_base(r) and r.time]
    anchor = bases[0] if anchor_single and len(bases) == 1 else None
    per_group: dict[tuple, Row] = {}
    for r in bases:
        per_group.setdefault(group_of(r), r)
    for row in rows:
        base = anchor or per_group.get(group_of(row))
        if base is not None and base.time is not None and row.time:
            row.values[column] = base.time / row.time
        else:
            row.values[column] = None


def _check_baseline(rows: list[Row], leaf: str, name: str, where: str) -> None:
    values = list(dict.fromkeys(str(r.values.get(leaf)) for r in rows))
    if name not in values:
        raise BenchmarkValueError(
            f"{where}: speedup_vs={name!r} is not a value of the "
            f"{leaf!r} column (values: {values})."
        )


def _final_columns(columns: list[str], marked: set[int]) -> list[str]:
    """``best`` (when something is marked) then ``error`` close the table."""
    cols = [c for c in columns if c != "error"]
    return (
        cols + (["best"] if marked else []) + (["error"] if "error" in columns else [])
    )


def _render(
    title: str,
    columns: list[str],
    rows: list[Row],
    marked: set[int],
    blank: Callable[[Row, Row | None, str], bool] = lambda row, prev, col: False,
    split: Callable[[Row, Row], bool] = lambda row, prev: False,
) -> list[str]:
    columns = _final_columns(columns, marked)

    def text(row: Row, col: str) -> str:
        if col == "best":
            return "*" if id(row) in marked else ""
        return format_cell(col, row.values.get(col), row.record)

    cells = [[text(r, c) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(t[i]) for t in cells]) for i, c in enumerate(columns)]
    rule = _RULE.join("-" * w for w in widths)
    lines = [title, _SEP.join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines.append(rule)
    prev = None
    for row, texts in zip(rows, cells, strict=True):
        if prev is not None and split(row, prev):
            lines.append(rule)
        shown = [
            "" if blank(row, prev, c) else t
            for c, t in zip(columns, texts, strict=True)
        ]
        lines.append(_SEP.join(t.ljust(w) for t, w in zip(shown, widths, strict=True)))
        prev = row
    return [line.rstrip() for line in lines]


def _config_group(columns: Sequence[str]) -> Callable[[Row], tuple]:
    """Rows of the same config: every describing column except backend/platform."""
    keys = [c for c in columns if not is_metric(c) and c not in ("backend", "platform")]
    return lambda row: _key(row, keys)


def _flat(title, columns, rows, opts: PrintOptions) -> list[str]:
    if opts.speedup_vs is not None:
        _check_baseline(rows, "backend", opts.speedup_vs, opts.where)
        columns = [*columns, f"vs_{opts.speedup_vs}"]
        base = lambda r: r.values.get("backend") == opts.speedup_vs  # noqa: E731
        _speedups(rows, columns[-1], base, _config_group(columns))
    sort_by, group_by = opts.sort_by, opts.group_by
    if sort_by:
        rows = sorted(rows, key=lambda r: _key(r, sort_by))
    marked: set[int] = set()
    if opts.highlight_best and group_by:
        marked = _best_ids(rows, lambda r: _key(r, group_by))
    return _render(title, columns, rows, marked)


def _grouped(title, columns, rows, opts, fixed, outer, leaf) -> list[str]:
    """``order_by`` (``outer`` empty) and ``vary_by`` share this layout."""
    ordered = fixed + outer + [leaf]
    columns = ordered + [c for c in columns if c not in ordered]
    rows = sorted(rows, key=lambda r: _key(r, ordered))
    sub = lambda r: _key(r, fixed + outer)  # noqa: E731
    if opts.speedup_vs is not None:
        _check_baseline(rows, leaf, opts.speedup_vs, opts.where)
        columns.append(f"vs_{opts.speedup_vs}")
        base = lambda r: str(r.values.get(leaf)) == opts.speedup_vs  # noqa: E731
        _speedups(rows, columns[-1], base, sub)
    marked = _best_ids(rows, sub) if opts.highlight_best else set()

    def blank(row: Row, prev: Row | None, col: str) -> bool:
        if prev is None or _key(row, fixed) != _key(prev, fixed):
            return False
        if col in fixed:
            return True
        return col in outer and _key(row, outer) == _key(prev, outer)

    split = lambda row, prev: _key(row, fixed) != _key(prev, fixed)  # noqa: E731
    return _render(title, columns, rows, marked, blank, split)


def _compare(rows: list[Row], columns: list[str], opts: PrintOptions) -> None:
    compare_by = keep = opts.compare_by
    if isinstance(keep, str):
        keep = compile_filter(keep, columns, f"{opts.where}: compare_by")
    assert keep is not None  # only called with compare_by
    chosen = {id(r) for r in rows if keep(dict(r.values))}
    if not chosen:
        raise BenchmarkValueError(
            f"{opts.where}: compare_by={compare_by!r} selects no row of this "
            "result, so there is no baseline; check the column values (print the "
            "result without compare_by first)."
        )
    is_base = lambda r: id(r) in chosen  # noqa: E731
    _speedups(rows, "speedup", is_base, _config_group(columns), anchor_single=True)


def _legend(opts: PrintOptions, field: str, compared: bool) -> list[str]:
    notes = []
    if opts.highlight_best and (opts.group_by or opts.order_by or opts.vary_by):
        notes.append(f"* fastest in its group (by {field})")
    if compared or opts.speedup_vs is not None:
        notes.append(f"speed-up = baseline {field} / row {field} (> 1: faster)")
    return ["", *notes] if notes else []


def format_rows(records: Sequence[Any], name: str, opts: PrintOptions) -> str:
    """Render ``records`` as the reference's row table under the options ``opts``.

    Example:
        >>> from polykernel.benchmark import BenchmarkRecord
        >>> from polykernel.benchmark.layouts import format_rows, PrintOptions
        >>> recs = [BenchmarkRecord("cpu", "a", "x", mean_ms=2.0),
        ...         BenchmarkRecord("cpu", "b", "x", mean_ms=1.0)]
        >>> print(format_rows(recs, "op", PrintOptions(sort_by=["mean_ms"])))
        BenchmarkResult: op
        platform | backend | label | mean_ms | std_ms | min_ms
        ---------+---------+-------+---------+--------+-------
        cpu      | b       | x     | 1       | —      | —
        cpu      | a       | x     | 2       | —      | —
    """
    title = f"BenchmarkResult: {name}" if name else "BenchmarkResult"
    if not records:
        return f"{title}: (no benchmark records)"
    columns, rows = build_rows(records)
    opts.check_columns(columns)
    compared = opts.compare_by is not None
    if compared:
        _compare(rows, columns, opts)
        columns = [*columns, "speedup"]
    if opts.order_by:
        lines = _grouped(
            title, columns, rows, opts, opts.order_by[:-1], [], opts.order_by[-1]
        )
    elif opts.vary_by:
        vary = opts.vary_by
        fixed = [c for c in columns if c not in vary and not is_metric(c)]
        lines = _grouped(title, columns, rows, opts, fixed, vary[:-1], vary[-1])
    else:
        lines = _flat(title, columns, rows, opts)
    return "\n".join(lines + _legend(opts, rank_field(records), compared))
