"""Candidates that are one program are timed once.

Two candidates whose jitted calls lower to the same StableHLO module run the same
compiled executable: a launch parameter that their generator ignores, two choices
that build the same kernel. Timing both can only measure noise, and on a loaded
machine that noise reached 6 % between the two (a CI run: the other test worker
held both cores), beyond the ranking's 3 % resolution: the tuner then "preferred"
one copy over the default. :func:`one_per_program` keeps one of each such group —
the default where it is one of them — and the others take its figures
(:func:`~.results.record`), so they tie by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .candidates import Candidate

__all__ = ["Same", "one_per_program"]

#: label -> (candidate, its jitted call)
Timed = dict[str, tuple[Candidate, Callable[..., Any]]]
#: label -> (candidate, the label of the timed candidate that is the same program)
Same = dict[str, tuple[Candidate, str]]


def one_per_program(
    timed: Mapping[str, tuple[Candidate, Callable[..., Any]]],
    default: Candidate,
    operands: Sequence[Any],
) -> tuple[Timed, Same]:
    """``(kept, same)``: ``timed`` (label -> (candidate, its jitted call)) with one
    candidate per lowered program, in their order, and for each one left out, its
    candidate and the label of the kept one that is the same program. A call that
    does not lower again (it ran once already) is kept on its own.

    Example:
        >>> import jax
        >>> from polykernel.tuning.candidates import Candidate
        >>> from polykernel.tuning.programs import one_per_program
        >>> a, c, b = (Candidate("numba", (("v", v),)) for v in "acb")
        >>> double, triple = jax.jit(lambda x: 2 * x), jax.jit(lambda x: 3 * x)
        >>> timed = {"a": (a, double), "c": (c, double), "b": (b, triple)}
        >>> kept, same = one_per_program(timed, c, [1.0])
        >>> list(kept), same == {"a": (a, "c")}
        (['c', 'b'], True)
    """
    groups: dict[str, list[str]] = {}
    for label, (_, fn) in timed.items():
        try:
            program = fn.lower(*operands).as_text()
        except Exception:  # timed on its own: its first call ran, so does it
            program = f"\0{label}"
        groups.setdefault(program, []).append(label)
    first: dict[str, str] = {}
    for labels in groups.values():
        kept = next((x for x in labels if timed[x][0] == default), labels[0])
        for label in labels:
            first[label] = kept
    kept_timed = {x: timed[x] for x in timed if first[x] == x}
    same = {x: (timed[x][0], first[x]) for x in timed if first[x] != x}
    return kept_timed, same
