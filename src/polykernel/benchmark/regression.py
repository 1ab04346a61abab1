"""Compare a benchmark run with an earlier results file: a performance gate for CI.

``polykernel benchmark --compare OLD.json --fail-above 1.10`` matches the records of
the run with those of ``OLD.json`` by (primitive, platform, backend, config) and
prints ``new / old`` of each one's median (the mean where a file has no median): a
ratio above ``fail_above`` is a regression, and the command then exits 1; so is a
record the old file timed that fails in this run. Records only one side has are
listed apart; a regression within the noise
of either run (its IQR / median) is marked so, since no gate should trust a noisy
median blindly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["Comparison", "compare_records", "format_comparison"]

WIDTH = 100
NAME = 54  # the key column
FAILED_NOW = "timed in the old file, failed in this run"


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One matched record: its key, the old and new per-call ms and ``ratio``
    (new / old); ``noisy`` when either run's spread exceeds the change itself."""

    key: tuple[str, str, str, str]
    old_ms: float
    new_ms: float
    ratio: float
    noisy: bool


def _key(record: Any) -> tuple[str, str, str, str]:
    return (record.primitive, record.platform, record.backend, record.label)


def _ms(record: Any) -> float | None:
    value = record.median_ms if record.median_ms is not None else record.mean_ms
    if not record.success or value is None or value != value or value <= 0:
        return None
    return float(value)


def compare_records(
    old: Iterable[Any], new: Iterable[Any]
) -> tuple[list[Comparison], list[str]]:
    """``(matched, unmatched)``: a :class:`Comparison` per record both runs timed,
    and a line per record only one side timed.

    Example:
        >>> from polykernel import BenchmarkRecord
        >>> from polykernel.benchmark.regression import compare_records
        >>> def rec(ms):
        ...     return BenchmarkRecord("cpu", "numba", "n", median_ms=ms, primitive="p")
        >>> old, new = [rec(1.0)], [rec(1.2)]
        >>> [round(c.ratio, 2) for c in compare_records(old, new)[0]]
        [1.2]
    """
    before = {_key(r): r for r in old}
    after = {_key(r): r for r in new}
    matched, unmatched = [], []
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        old_ms = _ms(a) if a is not None else None
        new_ms = _ms(b) if b is not None else None
        if old_ms is None or new_ms is None:
            if b is None:
                where = "only in the old file"
            elif a is None:
                where = "only in this run"
            elif old_ms is not None:
                where = FAILED_NOW  # timed before, fails now: a regression too
            else:
                where = "not timed in the old file"
            unmatched.append(f"{' / '.join(key)}: {where}")
            continue
        assert a is not None and b is not None  # both timed: both present
        ratio = new_ms / old_ms
        spreads = [r.relative_iqr or 0.0 for r in (a, b)]
        matched.append(
            Comparison(key, old_ms, new_ms, ratio, abs(ratio - 1) <= max(spreads))
        )
    return matched, unmatched


def format_comparison(
    matched: Sequence[Comparison], unmatched: Sequence[str], fail_above: float | None
) -> str:
    """A table of at most 100 columns: one line per matched record, worst first."""
    # 54 + 3 numbers (29) + the longest flag (15) = 98 columns: nothing is cut.
    lines = [
        f"{'primitive / platform / backend / config':<{NAME}} {'old ms':>9} "
        f"{'new ms':>9} {'new/old':>8}"
    ]
    for c in sorted(matched, key=lambda c: -c.ratio):
        flag = ""
        if fail_above is not None and c.ratio > fail_above:
            flag = " SLOWER (noisy)" if c.noisy else " SLOWER"
        name = " / ".join(c.key)
        name = name if len(name) <= NAME else name[: NAME - 1] + "…"
        line = f"{name:<{NAME}} {c.old_ms:9.4f} {c.new_ms:9.4f} {c.ratio:7.2f}x{flag}"
        lines.append(line[:WIDTH])
    lines += [line[:WIDTH] for line in unmatched]
    return "\n".join(lines)
