"""Text comparison table: rows = configs, columns = backends, speed-up vs a baseline."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .compare import PREFERRED_REFERENCE
from .record import NOISE_THRESHOLD, BenchmarkRecord

if TYPE_CHECKING:
    from .result import BenchmarkResult

__all__ = ["format_si", "format_table"]

_PREFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_si(value: float, unit: str) -> str:
    """Format ``value`` with an SI prefix and 4 significant figures.

    Example:
        >>> format_si(12_345_678, "B/s")
        '12.35 MB/s'
    """
    for scale, prefix in _PREFIXES:
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def _baseline(backends: list[str], requested: str | None) -> str | None:
    if requested is not None:
        if requested not in backends:
            raise ValueError(
                f"BenchmarkResult.table: baseline backend {requested!r} is not in "
                f"this result (backends: {backends})."
            )
        return requested
    if PREFERRED_REFERENCE in backends:
        return PREFERRED_REFERENCE
    return backends[0] if backends else None


def _cell(rec: BenchmarkRecord | None, base: BenchmarkRecord | None, best: bool) -> str:
    if rec is None:
        return "-"
    if not rec.success:
        return "FAILED"
    text = f"{rec.median_ms:.4g}"
    if base is not None and base.success and base.median_ms and rec is not base:
        text += f" ({base.median_ms / rec.median_ms:.2f}x)"
    if rec.throughput is not None and rec.throughput_unit:
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


def _footer(result: BenchmarkResult) -> list[str]:
    lines = [
        "* fastest   ! noisy (IQR > "
        f"{NOISE_THRESHOLD:.0%} of median)   x output differs from the reference"
    ]
    for m in result.mismatches:
        diff = "?" if m.max_abs_diff is None else f"{m.max_abs_diff:.4g}"
        lines.append(
            f"MISMATCH {m.primitive} [{m.platform}] {m.label}: {m.backend} vs "
            f"{m.reference}, max |diff| = {diff}"
        )
    for r in result.failures:
        first = (r.error or "").splitlines()[0] if r.error else "unknown error"
        lines.append(
            f"FAILED {r.primitive} [{r.platform}] {r.label} / {r.backend}: {first}"
        )
    return lines


def format_table(
    result: BenchmarkResult, baseline: str | None = None, highlight_best: bool = True
) -> str:
    """Render ``result`` as an aligned text table with a legend and problem list.

    Cells show the median time per call in ms, the speed-up against ``baseline``
    (default ``jax_raw`` when present, else the first backend), the throughput when
    the config declared its work, and marks: ``*`` fastest, ``!`` noisy, ``x``
    output mismatch. Failed runs read ``FAILED``.

    Raises:
        ValueError: ``baseline`` is not a backend of the result.

    Example:
        >>> from polykernel.benchmark import BenchmarkResult
        >>> print(format_table(BenchmarkResult([])))
        (no benchmark records)
    """
    if not result.records:
        return "(no benchmark records)"
    backends = list(dict.fromkeys(r.backend for r in result.records))
    base_name = _baseline(backends, baseline)
    keys = list(dict.fromkeys((r.primitive, r.platform, r.label) for r in result))
    cells = {(r.primitive, r.platform, r.label, r.backend): r for r in result}
    best = {id(r) for r in result.fastest_per_config().values()}
    many = len({k[0] for k in keys}) > 1 or len({k[1] for k in keys}) > 1
    head = (["primitive", "platform"] if many else []) + ["config"]
    head += [b + (" (baseline)" if b == base_name else "") for b in backends]
    rows = [head]
    for prim, platform, label in keys:
        base = cells.get((prim, platform, label, base_name))
        row = ([prim, platform] if many else []) + [label]
        for b in backends:
            rec = cells.get((prim, platform, label, b))
            row.append(_cell(rec, base, highlight_best and id(rec) in best))
        rows.append(row)
    title = "median ms per call (speed-up vs baseline)"
    if not many:
        title = f"{keys[0][0] or 'benchmark'} on {keys[0][1]}: {title}"
    return "\n".join([title, *_render(rows), "", *_footer(result)])
