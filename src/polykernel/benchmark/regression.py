"""Compare a benchmark run with an earlier results file: a performance gate for CI.

``polykernel benchmark --compare OLD.json --fail-above 1.10`` matches the records of
the run with those of ``OLD.json`` by (primitive, platform, backend, config) and
prints the *change* of each, ``new / old``; the command exits 1 when a change is
above ``fail_above`` beyond the measured spread of both runs, or a record the old
file timed fails in this run. Records only one side has are listed apart.

What is compared (``relative_to``):

* a time *relative to a reference backend timed in the same run* (``jax_raw``):
  each record's ``paired_ratio`` — its time over the reference's, timed in the same
  rounds (:mod:`.paired`) — or, for files without it, the ratio of the two medians. Two
  runs of identical code on a shared machine can differ by 1.5x in every time (a
  busier machine, another CPU clock), but alike for the kernel and its reference,
  so the ratio cancels that shift and keeps what the code changed. The reference's
  own records are listed, not judged (its ratio to itself is 1), unless it is the
  only backend of its case.
* the time itself (``relative_to=None``, or where a case has no reference timed in
  both files).

"Beyond the spread": each value comes with its spread (IQR / median of the times,
or ``paired_spread``); a change counts only when even the new value at the low end
of its spread over the old one at the high end of its (``low``; for times, about
the new run's lower quartile over the old run's upper one) is above
``fail_above``. A change above it at the values only is shown as *within spread*
and does not fail.

"Slower" relative to a reference also needs the record's own time to be slower:
the change of its fastest round (``min_ms``, where both files have it: load only
adds to it, so a burst in either run does not move it) above ``fail_above`` too.
A ratio moves when either side of it moves, and the reference moves on its own
(a host callback waits for the GIL and a thread switch under load; a JAX upgrade
speeds it up): CI saw identical Numba code at 1.22x its ratio, twice, while its
own time went 0.76x because the reference's went 0.62x. A kernel that got slower
is slower both ways; a record slower relative to the reference only is shown as
*time held* and does not fail.
The cost: a slowdown hidden by an equal speed-up of the whole machine between
the runs passes.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["AUTO", "Comparison", "compare_records", "format_comparison"]

WIDTH = 100
NAME = 42  # the backend / config column
FAILED_NOW = "timed in the old file, failed in this run"
#: ``relative_to``: the reference each case was timed against (``jax_raw`` where
#: registered), where both files hold it.
AUTO = "auto"
#: A spread (IQR / median) from which a value says nothing (printed ``noisy``).
USELESS_SPREAD = 1.0


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One matched record: its key, the old and new per-call ms, ``ratio`` (the
    change, new / old, of what was compared: the time, or with ``base`` the time
    relative to ``base``'s in the same run), ``noisy`` when the change is within
    the spread of the two runs, ``old_value``/``new_value`` (what was compared),
    ``spread`` (the two runs' spreads added), ``low`` (the change from the low end of
    the new value's spread to the high end of the old one's), ``judged`` (False for the
    reference's own records when comparing relative to it) and ``time_ratio``
    (with ``base``: the change of the record's own fastest time, new / old)."""

    key: tuple[str, str, str, str]
    old_ms: float
    new_ms: float
    ratio: float
    noisy: bool
    base: str | None = None
    old_value: float | None = None
    new_value: float | None = None
    spread: float = 0.0
    low: float | None = None
    judged: bool = True
    time_ratio: float | None = None

    def slower(self, fail_above: float) -> bool:
        """Whether this record is slower than ``fail_above`` beyond the spread
        (and, relative to a reference, in its own time as well)."""
        return self._beyond_spread(fail_above) and (
            self.time_ratio is None or self.time_ratio > fail_above
        )

    def time_held(self, fail_above: float) -> bool:
        """Slower relative to the reference beyond the spread, but the record's own
        time changed by ``fail_above`` or less: the reference moved, not it."""
        return (
            self._beyond_spread(fail_above)
            and self.time_ratio is not None
            and self.time_ratio <= fail_above
        )

    def _beyond_spread(self, fail_above: float) -> bool:
        low = self.ratio if self.low is None else self.low
        return self.judged and low > fail_above


def _key(record: Any) -> tuple[str, str, str, str]:
    return (record.primitive, record.platform, record.backend, record.label)


def _ms(record: Any) -> float | None:
    value = record.median_ms if record.median_ms is not None else record.mean_ms
    if not record.success or value is None or value != value or value <= 0:
        return None
    return float(value)


def _time_change(a: Any, b: Any) -> float:
    """New / old of the record's fastest round where both files have it (its own
    time, least moved by the load of the machine), else of its median."""
    fastest = [r.min_ms for r in (a, b)]
    if all(isinstance(v, int | float) and v > 0 for v in fastest):
        return float(fastest[1]) / float(fastest[0])
    return float(_ms(b)) / float(_ms(a))  # type: ignore[arg-type]


def _spread(record: Any) -> float:
    return float(record.relative_iqr or 0.0)


def _base_of(case: tuple[str, str, str], before: dict, after: dict, wanted):
    """The backend the records of ``case`` are compared relative to, or None."""
    if wanted is None:
        return None
    timed = [
        b
        for (p, pl, b, label), rec in after.items()
        if (p, pl, label) == case
        and _ms(rec) is not None
        and (p, pl, b, label) in before
        and _ms(before[(p, pl, b, label)]) is not None
    ]
    if wanted == AUTO:
        from ..backends import reference_backends

        references = reference_backends()
        wanted = next((b for b in timed if b in references), None)
    # Nothing else timed in both: the reference alone is judged by its times.
    return wanted if wanted in timed and len(timed) > 1 else None


def _relative(rec: Any, base_rec: Any) -> tuple[float, float]:
    """``(value, spread)`` of ``rec``'s time relative to ``base_rec``'s."""
    if rec.paired_base == base_rec.backend and rec.paired_ratio:
        return float(rec.paired_ratio), float(rec.paired_spread or 0.0)
    ms, base_ms = _ms(rec), _ms(base_rec)
    assert ms is not None and base_ms is not None  # both timed: checked before
    return ms / base_ms, _spread(rec) + _spread(base_rec)


def _compare(key, a, b, base, before, after) -> Comparison:
    old_ms, new_ms = _ms(a), _ms(b)
    assert old_ms is not None and new_ms is not None
    judged = base is None or key[2] != base
    if base is not None and judged:
        base_key = (key[0], key[1], base, key[3])
        old, s_old = _relative(a, before[base_key])
        new, s_new = _relative(b, after[base_key])
    else:
        old, s_old, new, s_new = old_ms, _spread(a), new_ms, _spread(b)
    change = new / old
    # The low end of the new value's spread over the high end of the old one's.
    low = change * max(1 - s_new / 2, 0.0) / (1 + s_old / 2)
    spread = s_old + s_new
    noisy = abs(change - 1) <= spread / 2 or spread / 2 >= USELESS_SPREAD
    time_change = _time_change(a, b) if base is not None and judged else None
    return Comparison(
        key, old_ms, new_ms, change, noisy, base if judged else None,
        old, new, spread, low, judged, time_change,
    )  # fmt: skip


def compare_records(
    old: Iterable[Any], new: Iterable[Any], *, relative_to: str | None = None
) -> tuple[list[Comparison], list[str]]:
    """``(matched, unmatched)``: a :class:`Comparison` per record both runs timed,
    and a line per record only one side timed.

    ``relative_to``: ``None`` compares times; a backend name compares each time
    relative to that backend's in the same run and case, where both files timed
    it (else the time); :data:`AUTO` does so with the case's reference backend
    (``jax_raw``), what ``polykernel benchmark --compare`` does by default.

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
    bases: dict[tuple[str, str, str], str | None] = {}
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
        case = (key[0], key[1], key[3])
        if case not in bases:
            bases[case] = _base_of(case, before, after, relative_to)
        matched.append(_compare(key, a, b, bases[case], before, after))
    return matched, unmatched


def _value(c: Comparison, value: float | None, ms: float) -> str:
    if c.base is None or value is None:
        return f"{ms:.4g} ms"
    return f"{value:.4g}x"


def _flag(c: Comparison, fail_above: float | None) -> str:
    if not c.judged:
        return "reference"
    if fail_above is None or c.ratio <= fail_above:
        return ""
    if c.time_held(fail_above):
        return "time held"
    return "SLOWER" if c.slower(fail_above) else "within spread"


def _legend(matched: Sequence[Comparison], fail_above: float | None) -> list[str]:
    bases = sorted({c.base for c in matched if c.base is not None})
    text = "change: new / old"
    if bases:
        text += (
            f" of each time over {', '.join(bases)}'s in the same run (the values "
            "with x; a change of the whole machine's speed cancels), else of the "
            "time"
        )
    text += (
        "; spread: half the sum of both runs' spreads (a time's IQR / median; a "
        "ratio's: its first and second half of rounds apart, or its processes)"
        if bases
        else "; spread: both runs' IQR / median, half of their sum"
    )
    flags = {_flag(c, fail_above) for c in matched}
    if "SLOWER" in flags:  # only the flags shown are explained
        text += (
            f"; SLOWER (fails the gate): above {fail_above:g} beyond that spread "
            "(the new value's low end / the old one's high end)"
            + (", and its own time too" if bases else "")
        )
    if "time held" in flags:
        text += (
            f"; time held: slower relative to {', '.join(bases)} only, its own time "
            f"changed by {fail_above:g}x or less (the reference moved), not judged "
            "slower"
        )
    if "within spread" in flags:
        text += f"; within spread: above {fail_above:g} at the medians only"
    if any(not c.judged for c in matched):
        text += "; reference: the base itself, not judged"
    return textwrap.wrap(text, WIDTH)


def _rows(matched: Sequence[Comparison], fail_above: float | None) -> list[str]:
    """One block per primitive and platform (worst first), a line per record."""
    groups: dict[tuple[str, str], list[Comparison]] = {}
    for c in sorted(matched, key=lambda c: (not c.judged, -c.ratio)):
        groups.setdefault(c.key[:2], []).append(c)
    lines = []
    for (primitive, platform), mine in groups.items():
        lines.append(f"{primitive} on {platform}:")
        for c in mine:
            name = f"{c.key[2]} / {c.key[3]}"
            if len(name) > NAME:  # its own line: nothing is cut
                lines.append(f"  {name}")
                name = ""
            half = c.spread / 2
            spread = "noisy" if half >= USELESS_SPREAD else f"±{half:.0%}"
            old = _value(c, c.old_value, c.old_ms)
            new = _value(c, c.new_value, c.new_ms)
            line = f"  {name:<{NAME}} {old:>12} {new:>12} {c.ratio:6.2f}x {spread:>6}"
            lines.append(f"{line} {_flag(c, fail_above)}".rstrip())
    return lines


def format_comparison(
    matched: Sequence[Comparison], unmatched: Sequence[str], fail_above: float | None
) -> str:
    """A table of at most 100 columns: one block per primitive and platform, a line
    per matched record (worst first), a legend, the records only one side timed."""
    # 2 + 42 + old, new (12 each: "0.0004176 ms") + change (7) + spread (6) + the
    # longest flag (13) with the spaces between them: 99 columns.
    lines = [
        f"  {'backend / config':<{NAME}} {'old':>12} {'new':>12} {'change':>7} "
        f"{'spread':>6}"
    ]
    lines += _rows(matched, fail_above)
    if matched:
        lines += _legend(matched, fail_above)
    for line in unmatched:
        lines += textwrap.wrap(line, WIDTH, subsequent_indent="  ")
    return "\n".join(lines)
