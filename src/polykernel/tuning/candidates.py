"""The candidates of one tuned case: every (backend, launch parameters) to time.

A backend registered with ``tune={"BLOCK": [256, 1024], "num_warps": [4, 8]}``
contributes one candidate per combination of the values; a backend without tunable
parameters contributes one. Order matters when a budget cuts the list: every
backend's *default* (its first values) comes first, in registration order, then the
remaining combinations backend by backend in turn, so a cut list still compares
every backend.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["Candidate", "enumerate_candidates"]

#: ``backend -> ((name, candidate values), ...)``: what a primitive registered.
Tunables = Mapping[str, Sequence[tuple[str, Sequence[Any]]]]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One backend with one value of each of its tunable parameters."""

    backend: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        """``backend`` or ``backend(BLOCK=256, num_warps=4)``."""
        if not self.params:
            return self.backend
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{self.backend}({inner})"


def _combinations(spec: Sequence[tuple[str, Sequence[Any]]]) -> list[tuple]:
    names = [name for name, _ in spec]
    return [
        tuple(zip(names, values, strict=True))
        for values in itertools.product(*(v for _, v in spec))
    ]


def enumerate_candidates(
    tunables: Tunables, max_candidates: int | None = None
) -> tuple[list[Candidate], list[Candidate]]:
    """``(kept, cut)``: every candidate of ``tunables`` in the order above, the
    first ``max_candidates`` kept (all when None).

    Example:
        >>> from polykernel.tuning.candidates import enumerate_candidates
        >>> kept, cut = enumerate_candidates(
        ...     {"numba": [("parallel", [False, True])], "jax_raw": []}, 2)
        >>> [c.label for c in kept], [c.label for c in cut]
        (['numba(parallel=False)', 'jax_raw'], ['numba(parallel=True)'])
    """
    per_backend = {b: _combinations(spec) for b, spec in tunables.items()}
    ordered = [Candidate(b, combos[0]) for b, combos in per_backend.items()]
    rests = [[Candidate(b, c) for c in combos[1:]] for b, combos in per_backend.items()]
    for batch in itertools.zip_longest(*rests):
        ordered.extend(c for c in batch if c is not None)
    if max_candidates is None:
        return ordered, []
    return ordered[:max_candidates], ordered[max_candidates:]
