"""What one case's timings become: every candidate's figures, and the entry.

:func:`record` turns the passes' timings into one :class:`~.report.Measured` per
timed candidate; :func:`entry` picks the winner by the one rule of
:mod:`polykernel.dispatch.ranking` (the default unless a candidate is faster beyond
the measured spread), among the candidates that stayed in the race
(:mod:`.timing`), and records every candidate *tried* — never one the budget left
out — with the identity of every kernel measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..dispatch.ranking import Scored, choose, in_the_race
from ..dispatch.records import Entry, Scope
from .candidates import Candidate
from .options import TuneOptions
from .programs import Same
from .report import Measured, TunedCase
from .timing import OUT_OF_RACE, PassTimes, combine_passes

__all__ = ["entry", "record"]


def record(
    case: TunedCase,
    timed: Mapping[str, tuple[Candidate, Any]],
    passes: Sequence[PassTimes],
    loaded: PassTimes | None,
    same: Same | None = None,
) -> None:
    """Add every timed candidate's combined figures (or its error) to ``case``, and
    each of ``same`` (a candidate that is the same program as a timed one: label ->
    (candidate, that one's label); :mod:`.programs`) with that one's figures and
    note (its error, a cut, out of the race), the same program named after it.

    Example:
        >>> from polykernel.dispatch.records import Key
        >>> from polykernel.tuning.candidates import Candidate
        >>> from polykernel.tuning.report import TunedCase
        >>> from polykernel.tuning.results import record
        >>> a, c = Candidate("numba", (("v", "a"),)), Candidate("numba", (("v", "c"),))
        >>> key = Key("op", "cpu", "*", "*", "*", None)
        >>> case = TunedCase("n=4", key, [[4]], a.label)
        >>> record(case, {a.label: (a, None)}, [], None, {c.label: (c, a.label)})
        >>> [(m.status, m.detail) for m in case.measured][1]
        ('cut', "max_seconds; the same program as numba(v='a'): timed once")
    """
    start = len(case.measured)
    _record_timed(case, timed, passes, loaded)
    figures = {m.candidate.label: m for m in case.measured[start:]}
    for candidate, twin in (same or {}).values():
        found = figures.get(twin)
        if found is not None:
            note = f"the same program as {twin}: timed once"
            note = f"{found.detail}; {note}" if found.detail else note
            case.measured.append(dataclasses.replace(found, candidate=candidate,
                                                     detail=note))  # fmt: skip


def _record_timed(
    case: TunedCase,
    timed: Mapping[str, tuple[Candidate, Any]],
    passes: Sequence[PassTimes],
    loaded: PassTimes | None,
) -> None:
    if not passes:
        for candidate, _ in timed.values():
            case.measured.append(Measured(candidate, "cut", detail="max_seconds"))
        return
    case.stopped_by = passes[-1].stopped_by
    combined = combine_passes(passes)
    under_load = combine_passes([loaded]) if loaded is not None else {}
    for name, (candidate, _) in timed.items():
        found = combined.get(name)
        if found is None:
            case.measured.append(Measured(candidate, "cut", detail="max_seconds"))
            continue
        if found.error is not None:
            detail = f"{type(found.error).__name__}: {found.error}"[:300]
            case.measured.append(Measured(candidate, "error", detail=detail))
            continue
        note = "" if found.raced else f"out of the race (>{OUT_OF_RACE}x)"
        under = under_load.get(name)
        loaded_ratio = under.ratio if under and under.error is None else None
        case.measured.append(
            Measured(candidate, "ok", found.median_s, found.spread, note,
                     ratio=found.ratio, ratio_spread=found.ratio_spread,
                     ratio_error=found.ratio_error, rounds=found.rounds,
                     loaded_ratio=loaded_ratio, raced=found.raced)
        )  # fmt: skip


def entry(
    case: TunedCase,
    default: Candidate,
    identity: Callable[[str], str],
    machine: Mapping[str, Any],
    options: TuneOptions,
) -> Entry | None:
    """The case's entry (None when nothing was timed): the winner by the one rule,
    every candidate tried."""
    ok = [m for m in case.measured if m.status == "ok" and m.median_s is not None]
    # The default is never dropped from the race (``runner``).
    scored = [Scored(m, m.ratio, m.ratio_error, m.loaded_ratio)
              for m in in_the_race(ok)]  # fmt: skip
    measured_default = next((m for m in ok if m.candidate == default), None)
    picked = choose(scored, default=measured_default)
    if picked is None:
        return None
    picked.item.chosen = True
    tried = [m for m in case.measured if m.status != "cut"]
    backends = sorted({m.candidate.backend for m in tried})
    recorded = {
        "case": case.label,
        "shape": case.shapes,
        "machine": dict(machine),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "passes": options.passes,
        "contention": options.contention,
    }
    return Entry(
        case.key,
        Scope.TUNED,
        picked.item.candidate,
        default,
        tuple((b, identity(b)) for b in backends),
        tuple(m.record() for m in tried),
        recorded,
    )
