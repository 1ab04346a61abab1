"""Text comparison table: rows = configs, columns = backends, speed-up vs a baseline."""

from __future__ import annotations

from collections.abc import Sequence

from .compare import pick_reference
from .ranking import fastest_per_config, is_known, mismatches, rank_field, rank_ms
from .record import NOISE_THRESHOLD, BenchmarkRecord
from .rows import format_si

__all__ = ["format_si", "format_table"]


def _baseline(backends: list[str], requested: str | None) -> str | None:
    if requested is not None:
        if requested not in backends:
            raise ValueError(
                f"BenchmarkResult.table: baseline backend {requested!r} is not in "
                f"this result (backends: {backends})."
            )
        return requested
    return pick_reference(backends)


def _time_text(value: float | None) -> str:
    return "nan" if value is None else f"{value:.4g}"


def _cell(rec: BenchmarkRecord | None, base_ms: float | None, field: str, best: bool):
    if rec is None:
        return "-"
    if not rec.success:
        return "FAILED"
    ms = rank_ms(rec, field)
    text = _time_text(ms)
    if base_ms and ms:
        text += f" ({base_ms / ms:.2f}x)"
    if is_known(rec.throughput) and rec.throughput_unit:
        text += f" {format_si(rec.throughput, rec.throughput_unit)}"
    marks = ("*" if best else "") + ("!" if rec.noisy else "")
    marks += "x" if rec.matches_reference is False else ""
    return f"{text} {marks}".rstrip()


def _render(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return [line.rstrip() for line in lines]


def _footer(records: Sequence[BenchmarkRecord], field: str) -> list[str]:
    lines = [
        f"* fastest   ! noisy (IQR > {NOISE_THRESHOLD:.0%} of median)   "
        "x output differs from the reference"
    ]
    if field == "mean_ms":
        lines.append("(times are means: not every record has a median)")
    for m in mismatches(records):
        diff = "?" if m.max_abs_diff is None else f"{m.max_abs_diff:.4g}"
        lines.append(
            f"MISMATCH {m.primitive} [{m.platform}] {m.label}: {m.backend} vs "
            f"{m.reference}, max |diff| = {diff}"
        )
    for r in records:
        if r.success:
            continue
        first = (r.error or "").strip().splitlines()
        lines.append(
            f"FAILED {r.primitive} [{r.platform}] {r.label} / {r.backend}: "
            f"{first[0] if first else 'unknown error'}"
        )
    return lines


def format_table(
    records: Sequence[BenchmarkRecord],
    name: str = "",
    baseline: str | None = None,
    highlight_best: bool = True,
) -> str:
    """Render ``records`` as an aligned configs x backends table with a legend.

    Cells show the time per call in ms (the median; the mean when some record has
    no median, as records built the reference way), the speed-up against
    ``baseline`` (default ``jax_raw`` when present, else the first backend), the
    throughput when the config declared its work, and marks: ``*`` fastest, ``!``
    noisy, ``x`` output mismatch. Failed runs read ``FAILED`` and are listed with
    their error under the table; an unknown time reads ``nan``.

    Raises:
        ValueError: ``baseline`` is not a backend of the records.

    Example:
        >>> print(format_table([]))
        (no benchmark records)
    """
    if not records:
        return "(no benchmark records)"
    field = rank_field(records)
    backends = list(dict.fromkeys(r.backend for r in records))
    base_name = _baseline(backends, baseline)
    keys = list(dict.fromkeys((r.primitive, r.platform, r.label) for r in records))
    cells = {(r.primitive, r.platform, r.label, r.backend): r for r in records}
    best = {id(r) for r in fastest_per_config(records).values()}
    many = len({k[0] for k in keys}) > 1 or len({k[1] for k in keys}) > 1
    head = (["primitive", "platform"] if many else []) + ["config"]
    head += [b + (" (baseline)" if b == base_name else "") for b in backends]
    rows = [head]
    for prim, platform, label in keys:
        base = (
            None if base_name is None else cells.get((prim, platform, label, base_name))
        )
        base_ms = rank_ms(base, field) if base is not None else None
        row = ([prim, platform] if many else []) + [label]
        for b in backends:
            rec = cells.get((prim, platform, label, b))
            mark = highlight_best and id(rec) in best
            row.append(_cell(rec, None if rec is base else base_ms, field, mark))
        rows.append(row)
    stat = field.removesuffix("_ms")
    title = f"{stat} ms per call (speed-up vs baseline)"
    if not many:
        title = f"{keys[0][0] or name or 'benchmark'} on {keys[0][1]}: {title}"
    elif name:
        title = f"{name}: {title}"
    return "\n".join([title, *_render(rows), "", *_footer(records, field)])
