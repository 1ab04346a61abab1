"""Text comparison table: rows = configs, columns = backends, speed-up vs a baseline.

The table keeps within a width (100 columns by default, what a terminal shows
without wrapping): a table of several primitives or platforms that does not fit is
split into one table per primitive and platform, and a table still too wide puts
its backends in several column blocks, each repeating the config column. Lines under
the table (mismatches, failures, noisy times in words) are wrapped to the width.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from ..errors import BenchmarkValueError
from .compare import pick_reference
from .launchnotes import launch_lines
from .ranking import fastest_per_config, is_known, mismatches, rank_field, rank_ms
from .record import NOISE_THRESHOLD, BenchmarkRecord, runs_note
from .rows import format_si

__all__ = ["TABLE_WIDTH", "format_si", "format_table"]

#: The widest line the comparison table prints by default (columns).
TABLE_WIDTH = 100


def _baseline(backends: list[str], requested: str | None) -> str | None:
    if requested is not None:
        if requested not in backends:
            raise BenchmarkValueError(
                f"BenchmarkResult.table: baseline backend {requested!r} is not in "
                f"this result (backends: {backends})."
            )
        return requested
    return pick_reference(backends)


def _time_text(value: float | None) -> str:
    return "nan" if value is None else f"{value:.4g}"


def _speedup(rec: BenchmarkRecord, base_ms: float | None, base: str | None, ms):
    """The baseline's time over ``rec``'s: from their fast ends where both were
    timed in the same rounds (``paired_ratio``: load and a change of the machine's
    speed during the case cancel), else the ratio of their times; None when
    unknown."""
    if rec.backend == base:
        return 1.0
    if rec.paired_base == base and is_known(rec.paired_ratio) and rec.paired_ratio:
        return 1.0 / rec.paired_ratio
    return base_ms / ms if base_ms and ms else None


def _noisy(rec: BenchmarkRecord, ratios: bool) -> bool:
    """Noisy by its time's spread, or (``ratios``: the speed-up is the headline)
    by the spread of its ratio to the baseline (``paired_spread``), where known."""
    if ratios and is_known(rec.paired_spread):
        return (rec.paired_spread or 0.0) > rec.noise_bound
    return rec.noisy


def _cell(rec, base_ms, field: str, best: bool, base: str | None, ratios: bool):
    if rec is None:
        return "-"
    if not rec.success:
        return "FAILED"
    ms = rank_ms(rec, field)
    speedup = _speedup(rec, base_ms, base, ms)
    if ratios:
        text = "nan" if speedup is None else f"{speedup:.2f}x"
        text += f" ({_time_text(ms)} ms)"
    else:
        text = _time_text(ms)
        if speedup is not None and rec.backend != base:
            text += f" ({speedup:.2f}x)"
        if is_known(rec.throughput) and rec.throughput_unit:
            text += f" {format_si(rec.throughput, rec.throughput_unit)}"
    marks = ("*" if best else "") + ("!" if _noisy(rec, ratios) else "")
    marks += "x" if rec.matches_reference is False else ""
    return f"{text} {marks}".rstrip()


def _render(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return [line.rstrip() for line in lines]


def _blocks(rows: list[list[str]], fixed: int, width: int) -> list[list[int]]:
    """Column indices of each block: the ``fixed`` describing columns, then as many
    backend columns as fit in ``width`` (at least one)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    base = sum(widths[:fixed]) + 3 * (fixed - 1)
    blocks: list[list[int]] = [[]]
    used = base
    for i in range(fixed, len(widths)):
        if blocks[-1] and used + 3 + widths[i] > width:
            blocks.append([])
            used = base
        blocks[-1].append(i)
        used += 3 + widths[i]
    return [list(range(fixed)) + block for block in blocks]


def _render_within(rows: list[list[str]], fixed: int, width: int | None) -> list[str]:
    lines = _render(rows)
    if width is None or max(len(line) for line in lines) <= width:
        return lines
    out: list[str] = []
    for k, cols in enumerate(_blocks(rows, fixed, width)):
        out += [""] if k else []
        out += _render([[r[i] for i in cols] for r in rows])
    return out


def _legend(records: Sequence[BenchmarkRecord], ratios: bool) -> str:
    bounds = {r.noise_bound for r in records if r.success} or {NOISE_THRESHOLD}
    bound = f"{bounds.pop():.0%}" if len(bounds) == 1 else None
    if ratios:  # the spread of paired_ratio: its halves' disagreement
        noisy = (
            f"the ratio's spread > {bound}"
            if bound
            else "the ratio's spread over bound"
        )
    else:
        noisy = f"IQR > {bound} of median" if bound else "IQR over bound"
    return f"* fastest   ! noisy ({noisy})   x output differs from the reference"


def _footer(
    records: Sequence[BenchmarkRecord],
    field: str,
    width: int | None,
    ratios: bool = False,
    many: bool = False,
) -> list[str]:
    lines = [_legend(records, ratios)]
    if field == "mean_ms":
        lines.append("(times are means: not every record has a median)")
    notes: list[tuple[str, str]] = []  # (where, what)
    for m in mismatches(records):
        diff = "?" if m.max_abs_diff is None else f"{m.max_abs_diff:.4g}"
        notes.append(
            (
                f"MISMATCH {m.primitive} [{m.platform}] {m.label}:",
                f"{m.backend} vs {m.reference}, max |diff| = {diff}",
            )
        )
    notes += _noisy_notes(records, ratios)
    for r in records:
        if r.success:
            continue
        first = (r.error or "").strip().splitlines()
        where = f"FAILED {r.primitive} [{r.platform}] {r.label} / {r.backend}:"
        notes.append((where, first[0] if first else "unknown error"))
    lines += [line for n in notes for line in _note(*n, width)]
    return lines + launch_lines(records, width, many)


def _spread_of(r: BenchmarkRecord, ratios: bool) -> float:
    return (r.paired_spread if ratios and is_known(r.paired_spread) else None) or (
        r.relative_iqr or 0.0
    )


def _percent(spread: float) -> str:
    # A spread of 100 % or more says only "noisy": "435%" reads as a measurement.
    return f"{spread:.0%}" if spread < 1 else "100%+"


def _noisy_notes(
    records: Sequence[BenchmarkRecord], ratios: bool = False
) -> list[tuple[str, str]]:
    """One note per config with noisy times (``ratios``: noisy ratios to the
    baseline): each noisy backend's spread, in words."""
    groups: dict[tuple[str, str, str], list[BenchmarkRecord]] = {}
    for r in records:
        if r.success and _noisy(r, ratios):
            groups.setdefault((r.primitive, r.platform, r.label), []).append(r)
    notes = []
    for (prim, platform, label), recs in groups.items():
        if len(recs) == 1 and not ratios:
            r = recs[0]
            where = f"NOISY {prim} [{platform}] {label} / {r.backend}:"
            notes.append((where, r.noise_note or ""))
            continue
        spreads = ", ".join(
            f"{r.backend} {_percent(_spread_of(r, ratios))}" for r in recs
        )
        bounds = {r.noise_bound for r in recs}
        runs = {(r.n, r.n_sampled, r.stopped_by, r.passes, r.processes) for r in recs}
        what = f"{'ratio spread' if ratios else 'IQR / median'} {spreads}"
        what += f" (bound {bounds.pop():.0%})" if len(bounds) == 1 else ""
        what += runs_note(*runs.pop()) if len(runs) == 1 else ""
        notes.append((f"NOISY {prim} [{platform}] {label}:", what))
    return notes


def _note(where: str, what: str, width: int | None) -> list[str]:
    """``where what`` on one line if it fits, else ``where`` then ``what`` indented,
    each wrapped to ``width``."""
    line = f"{where} {what}"
    if width is None or len(line) <= width:
        return [line]
    wrap = textwrap.TextWrapper(width, subsequent_indent="  ", break_on_hyphens=False)
    body = textwrap.TextWrapper(
        width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False
    )
    return wrap.wrap(where) + body.wrap(what)


def _best_speedup(cells, case, backends, base_name, field) -> set[int]:
    """``{id}`` of the record of ``case`` with the largest speed-up."""
    base = cells.get((*case, base_name))
    base_ms = rank_ms(base, field) if base is not None else None
    found = []
    for b in backends:
        rec = cells.get((*case, b))
        if rec is not None and rec.success:
            speedup = _speedup(rec, base_ms, base_name, rank_ms(rec, field))
            found += [(speedup, id(rec))] if speedup is not None else []
    return {max(found)[1]} if found else set()


def _rows(
    records, keys, base_name, field, highlight_best, many, ratios=False
) -> list[list[str]]:
    """The header and one row per ``(primitive, platform, label)`` of ``keys``."""
    in_keys = set(keys)
    mine = [r for r in records if (r.primitive, r.platform, r.label) in in_keys]
    backends = list(dict.fromkeys(r.backend for r in mine))
    cells = {(r.primitive, r.platform, r.label, r.backend): r for r in mine}
    best = {id(r) for r in fastest_per_config(records).values()}
    head = (["primitive", "platform"] if many else []) + ["config"]
    head += [b + (" (baseline)" if b == base_name else "") for b in backends]
    rows = [head]
    for prim, platform, label in keys:
        base = (
            None if base_name is None else cells.get((prim, platform, label, base_name))
        )
        base_ms = rank_ms(base, field) if base is not None else None
        row = ([prim, platform] if many else []) + [label]
        if ratios:  # the fastest by the headline, the speed-up (paired_ratio)
            case = (prim, platform, label)
            best = _best_speedup(cells, case, backends, base_name, field)
        for b in backends:
            rec = cells.get((prim, platform, label, b))
            mark = highlight_best and id(rec) in best
            base_ms_ = None if rec is base else base_ms
            row.append(_cell(rec, base_ms_, field, mark, base_name, ratios))
        rows.append(row)
    return rows


def format_table(
    records: Sequence[BenchmarkRecord],
    name: str = "",
    baseline: str | None = None,
    highlight_best: bool = True,
    width: int | None = TABLE_WIDTH,
    *,
    speedup_first: bool = False,
) -> str:
    """Render ``records`` as an aligned configs x backends table with a legend.

    Cells show the time per call in ms (the median; the mean when some record has
    no median, as records built the reference way), the speed-up against
    ``baseline`` (default ``jax_raw`` when present, else the first backend; from
    the fast ends of both where they were timed in the same rounds, ``paired_ratio``),
    the throughput when the config declared its work, and marks: ``*`` fastest,
    ``!`` noisy, ``x`` output mismatch. Noisy times are listed in words under the
    table (``NOISY ...: IQR 23% of the median (bound 10%) after 400 runs``), failed
    runs with their error (the cell reads ``FAILED``); an unknown time reads
    ``nan``; then each backend's launch parameters and why they were chosen, where
    records know them. No line is wider than ``width`` (``None``: no limit) unless
    a single config and backend cell are wider: the table is split as the module
    says. With ``speedup_first`` the speed-up leads each cell (the time follows in
    brackets; no throughput) and ``!`` judges the spread of that ratio: the figure
    a second run on the same machine reproduces, where times move with its load.

    Raises:
        ValueError: ``baseline`` is not a backend of the records.

    Example:
        >>> from polykernel.benchmark.table import format_table
        >>> print(format_table([]))
        (no benchmark records)
    """
    if not records:
        return "(no benchmark records)"
    field = rank_field(records)
    backends = list(dict.fromkeys(r.backend for r in records))
    base_name = _baseline(backends, baseline)
    keys = list(dict.fromkeys((r.primitive, r.platform, r.label) for r in records))
    many = len({k[0] for k in keys}) > 1 or len({k[1] for k in keys}) > 1
    opts = (base_name, field, highlight_best)
    rows = _rows(records, keys, *opts, many, speedup_first)
    body = _render(rows)
    if width is not None and max(len(line) for line in body) > width:
        if not many:
            body = _render_within(rows, 1, width)
        else:  # one table per primitive and platform, each kept within the width
            body = []
            for prim, platform in dict.fromkeys(k[:2] for k in keys):
                mine = [k for k in keys if k[:2] == (prim, platform)]
                part = _rows(records, mine, *opts, False, speedup_first)
                body += ["", f"{prim} on {platform}:", *_render_within(part, 1, width)]
            body = body[1:]
    stat = field.removesuffix("_ms")
    title = f"{stat} ms per call (speed-up vs baseline)"
    if speedup_first:
        title = f"speed-up vs {base_name}, same rounds ({stat} ms per call)"
    if not many:
        title = f"{keys[0][0] or name or 'benchmark'} on {keys[0][1]}: {title}"
    elif name:
        title = f"{name}: {title}"
    footer = _footer(records, field, width, speedup_first, many)
    return "\n".join([title, *body, "", *footer])
