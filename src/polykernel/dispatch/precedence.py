"""The precedence of dispatch: which source decides a lowering's backend, in order.

This table is the one statement of the order. :func:`.decide.decide` applies it
level by level, ``tests/dispatch/test_precedence.py`` checks every pair of levels,
and the pages that state it (``docs/tuning.md``, ``docs/index.md``,
``docs/porting.md``) show it as :func:`render` writes it (``python
docs/structure/precedence.py --write``).
"""

from __future__ import annotations

import dataclasses
import enum

__all__ = ["LEVELS", "Level", "Reason", "level_of", "render"]


class Reason(enum.StrEnum):
    """Why a decision was taken (a string: ``decision.reason == "exact"`` works)."""

    EXPLICIT = "explicit"
    PREFERENCE = "preference"
    SET_DEFAULT = "set_default"
    EXACT = "exact"
    NEAREST = "nearest"
    FAMILY = "family"
    SAVED = "saved_default"
    DEFAULT = "default"

    def __repr__(self) -> str:  # shown as the string it equals: 'exact'
        return repr(self.value)


@dataclasses.dataclass(frozen=True)
class Level:
    """One level: the reasons it gives and what it is, in words."""

    number: int
    name: str
    reasons: tuple[Reason, ...]
    what: str


LEVELS = (
    Level(1, "call", (Reason.EXPLICIT,), "the call's `backend=` argument"),
    Level(
        2,
        "set_backend",
        (Reason.PREFERENCE,),
        "`polykernel.set_backend(platform, backend)`, for primitives that registered "
        "that backend (others warn once and fall through)",
    ),
    Level(
        3, "set_default", (Reason.SET_DEFAULT,), "`op.set_default(platform, backend)`"
    ),
    Level(
        4,
        "tuned",
        (Reason.EXACT, Reason.NEAREST, Reason.FAMILY),
        "a tuned entry for the call's device and shape: the exact bucket, else the "
        "nearest on the same device kind, else the same family",
    ),
    Level(
        5,
        "saved default",
        (Reason.SAVED,),
        "a saved default (`polykernel benchmark --save-defaults`)",
    ),
    Level(
        6,
        "registered",
        (Reason.DEFAULT,),
        "`asdefault=True` at registration, else the first backend registered",
    ),
)


def level_of(reason: Reason | str) -> Level:
    """The level that gives ``reason``."""
    return next(level for level in LEVELS if Reason(reason) in level.reasons)


def render() -> str:
    """The precedence as the docs show it (a numbered Markdown list)."""
    lines = [
        f"{level.number}. **{level.name}** "
        f"({', '.join(f'`{r.value}`' for r in level.reasons)}): {level.what};"
        for level in LEVELS
    ]
    lines[-1] = lines[-1][:-1] + "."
    lines.append("")
    lines.append(
        "Levels 1–3 choose the backend only: a tuned entry still gives that backend "
        "the launch parameters measured best for it, and a keyword the call passes "
        "itself always wins over a tuned value. Stale entries (their kernel changed "
        "since they were measured) are never used."
    )
    return "\n".join(lines)
