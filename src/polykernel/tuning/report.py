"""What a tuning run found, as objects, a terminal table (at most 100 columns) and
JSON: per case, every candidate's median and spread, or why it was not timed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..settings.tuned_table import Choice, Key, TunedEntry
from .candidates import Candidate

__all__ = ["Measured", "TuneReport", "TunedCase"]

#: What became of a candidate: timed, refused because its outputs differ from the
#: reference's, failed to build or run, or not tried (the budget cut it).
STATUSES = ("ok", "mismatch", "error", "cut")
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
    #: Time relative to the case's fastest candidate, round by round (median), and
    #: the spread of that ratio (IQR / median): see ``benchmark.paired``.
    ratio: float = 1.0
    ratio_spread: float = 0.0

    def choice(self) -> Choice:
        return Choice(
            self.candidate.backend,
            self.candidate.params,
            float(self.median_s or 0.0),
            float(self.spread or 0.0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.candidate.backend,
            "params": dict(self.candidate.params),
            "status": self.status,
            "median_s": self.median_s,
            "spread": self.spread,
            "detail": self.detail,
            "chosen": self.chosen,
            "ratio": self.ratio if self.status == "ok" else None,
            "ratio_spread": self.ratio_spread if self.status == "ok" else None,
        }


@dataclasses.dataclass
class TunedCase:
    """One tuned case: its label, key, operand shapes, the reference candidate's
    label, every candidate and the entry recorded (None when nothing ran)."""

    label: str
    key: Key
    shapes: list[list[int]]
    reference: str
    measured: list[Measured] = dataclasses.field(default_factory=list)
    stopped_by: str = ""
    entry: TunedEntry | None = None

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

    @property
    def entries(self) -> list[TunedEntry]:
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
        for case in self.cases:
            lines.append(
                _fit(
                    f"{case.key.platform} {case.label}  shapes {case.shapes}"
                    f"  reference {case.reference}"
                )
            )
            ok = sorted(
                (m for m in case.measured if m.status == "ok"),
                key=lambda m: m.ratio,
            )
            for m in ok + [m for m in case.measured if m.status != "ok"]:
                lines.append(_row(m))
        if self.cut:
            lines.append(f"cut by the budget: {len(self.cut)}")
            lines += [_fit(f"  {c}") for c in self.cut]
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
            "saved_to": str(self.saved_to) if self.saved_to else None,
            "cases": [
                {
                    "label": c.label,
                    "platform": c.key.platform,
                    "shapes": c.shapes,
                    "bucket": list(c.key.bucket),
                    "signature": c.key.signature,
                    "reference": c.reference,
                    "stopped_by": c.stopped_by,
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
    return text if len(text) <= WIDTH else text[: WIDTH - 1] + "…"


def _row(m: Measured) -> str:
    mark = "*" if m.chosen else " "
    if m.status == "ok" and m.median_s is not None:
        text = (
            f" {mark} {m.candidate.label:<44} {m.median_s * 1e3:10.4f} ms "
            f"±{(m.spread or 0) * 100:4.1f}% {m.ratio:5.2f}x "
            f"±{m.ratio_spread * 100:.0f}%"
        )
    else:
        text = f"   {m.candidate.label:<44} {m.status}: {m.detail}"
    return _fit(text)
