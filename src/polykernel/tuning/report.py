"""What a tuning run found, as objects, a terminal table (at most 100 columns) and
JSON: per case, every candidate's median and spread, or why it was not timed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..dispatch.records import Choice, Entry, Key, Measurement
from .candidates import Candidate

__all__ = ["Measured", "TuneReport", "TunedCase"]

#: What became of a candidate: timed; refused because its outputs (or its inputs)
#: differ from the reference's; failed to build or run; abandoned past its share of
#: the budget; not tried (the budget cut it).
STATUSES = ("ok", "mismatch", "error", "timeout", "cut")
WIDTH = 100


@dataclasses.dataclass
class Measured:
    """One candidate of one case: ``status`` (:data:`STATUSES`), its median and
    spread (IQR / median) when timed, ``detail`` otherwise, ``chosen`` for the
    winner."""

    candidate: Candidate
    status: str
    median_s: float | None = None
    spread: float | None = None
    detail: str = ""
    chosen: bool = False
    #: Time relative to the case's fastest candidate, round by round (median), the
    #: spread of that ratio (IQR / median), the half-width of its interval and the
    #: rounds behind it: see ``benchmark.paired`` and ``tuning.timing``.
    ratio: float = 1.0
    ratio_spread: float = 0.0
    ratio_error: float = 0.0
    rounds: int = 0
    #: The ratio with the machine's other cores busy (``tune(contention=True)``).
    loaded_ratio: float | None = None
    #: False when the candidate was dropped from a pass's race (``tuning.timing``):
    #: more than twice the fastest's time in its first rounds, its ratio comes from
    #: those three rounds alone and it does not compete for the win.
    raced: bool = True

    def choice(self) -> Choice:
        return self.candidate

    def record(self) -> Measurement:
        """This candidate as a table records it."""
        ok = self.status == "ok"
        return Measurement(
            self.candidate,
            self.status,
            self.median_s,
            self.spread,
            self.ratio if ok else None,
            self.ratio_spread if ok else None,
            self.ratio_error if ok else None,
            self.rounds if ok else 0,
            self.loaded_ratio if ok else None,
            self.detail,
            self.raced,
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.record().to_json(), "chosen": self.chosen}


@dataclasses.dataclass
class TunedCase:
    """One tuned case: its label, key, operand shapes, the reference candidate's
    label, every candidate tried, how many ``max_candidates`` left out, notes, and
    the entry recorded (None when nothing was timed)."""

    label: str
    key: Key
    shapes: list[list[int]]
    reference: str
    measured: list[Measured] = dataclasses.field(default_factory=list)
    stopped_by: str = ""
    entry: Entry | None = None
    not_tried: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def winner(self) -> Measured | None:
        return next((m for m in self.measured if m.chosen), None)


@dataclasses.dataclass
class TuneReport:
    """The result of ``op.tune()``: the cases, what the budget cut, where the
    winners were saved (None: not saved), the machine and how many passes timed
    each case."""

    primitive: str
    cases: list[TunedCase] = dataclasses.field(default_factory=list)
    cut: list[str] = dataclasses.field(default_factory=list)
    saved_to: Path | None = None
    machine: dict[str, Any] = dataclasses.field(default_factory=dict)
    passes: int = 1
    notes: list[str] = dataclasses.field(default_factory=list)
    #: In a ``jax.distributed`` job: the processes, this one's index, the cases of
    #: the job, the outcome (``complete`` or ``fallback: why``) and what each
    #: process timed (``{process: [[case, candidate], ...]}``); None alone.
    job: dict[str, Any] | None = None

    @property
    def entries(self) -> list[Entry]:
        return [c.entry for c in self.cases if c.entry is not None]

    def winners(self) -> dict[str, str]:
        """``{case label: winning candidate}``."""
        return {c.label: c.winner.candidate.label for c in self.cases if c.winner}

    def table(self) -> str:
        """The report as text lines of at most 100 columns."""
        lines = [
            f"tuning {self.primitive} ({len(self.cases)} case"
            f"{'' if len(self.cases) == 1 else 's'})"
        ]
        if self.job is not None:  # a jax.distributed job: this process's share
            job = self.job
            lines.append(_fit(
                f"job: process {job.get('process')} of {job.get('processes')}, "
                f"{len(self.cases)} of {job.get('cases_in_job', '?')} cases timed "
                f"here; {job.get('outcome', 'not finished')}"
            ))  # fmt: skip
        for case in self.cases:
            lines.append(
                _fit(f"{case.key.platform} {case.label}  shapes {case.shapes}")
            )
            lines.append(_fit(f"  reference {case.reference}"))
            ok = sorted(
                (m for m in case.measured if m.status == "ok"), key=lambda m: m.ratio
            )
            for m in ok + [m for m in case.measured if m.status != "ok"]:
                lines.append(_row(m))
            if case.not_tried:
                lines.append(
                    _fit(f"   {case.not_tried} more not tried (max_candidates)")
                )
            lines += [_fit(f"   note: {n}") for n in case.notes]
        if self.cut:
            lines.append(f"cut by the budget: {len(self.cut)}")
            lines += [_fit(f"  {c}") for c in self.cut]
        lines += [_fit(f"note: {n}") for n in self.notes]
        measured = [m for c in self.cases for m in c.measured if m.status == "ok"]
        if any(m.ratio_error >= NOISY_ERROR for m in measured):
            lines.append(_fit(NOISY_NOTE))
        if self.saved_to is not None:
            lines.append(_fit(f"saved to {self.saved_to}"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_json(self) -> dict[str, Any]:
        return {
            "primitive": self.primitive,
            "machine": self.machine,
            "passes": self.passes,
            "cut": self.cut,
            "notes": self.notes,
            "saved_to": str(self.saved_to) if self.saved_to else None,
            "job": self.job,
            "cases": [
                {
                    "label": c.label,
                    "platform": c.key.platform,
                    "shapes": c.shapes,
                    "bucket": None if c.key.bucket is None else list(c.key.bucket),
                    "signature": c.key.signature,
                    "reference": c.reference,
                    "stopped_by": c.stopped_by,
                    "not_tried": c.not_tried,
                    "notes": c.notes,
                    "candidates": [m.to_json() for m in c.measured],
                }
                for c in self.cases
            ],
        }

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_json` to ``path`` (the data behind the docs' plot)."""
        path = Path(path)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path


def _fit(text: str) -> str:
    """``text`` wrapped within :data:`WIDTH` columns (continued, indented, on the
    next lines): nothing is cut."""
    import textwrap

    wrap = textwrap.TextWrapper(
        WIDTH, subsequent_indent="     ", break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(wrap.wrap(text)) or text


#: A ratio whose interval is this wide (its half-width over the ratio) says
#: nothing about which candidate is faster: printed ``noisy``, not ``±435%``.
NOISY_ERROR = 1.0
NOISY_NOTE = (
    "noisy: a ratio known only within ±100% or more (time it again: more passes, "
    "a quieter machine)"
)


def _error(m: Measured) -> str:
    return "noisy" if m.ratio_error >= NOISY_ERROR else f"±{m.ratio_error:.0%}"


def _row(m: Measured) -> str:
    mark = "*" if m.chosen else " "
    if m.status == "ok" and m.median_s is not None:
        loaded = f" {m.loaded_ratio:5.2f}x loaded" if m.loaded_ratio is not None else ""
        note = f" ({m.detail})" if m.detail else ""  # out of the race, one program
        text = (
            f" {mark} {m.candidate.label:<40} {m.median_s * 1e3:9.4f} ms "
            f"{m.ratio:5.2f}x {_error(m)}{loaded}{note}"
        )
    else:
        text = f"   {m.candidate.label:<40} {m.status}: {m.detail}"
    return _fit(text)
