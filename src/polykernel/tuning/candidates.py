"""The candidates of one tuned case: every (backend, launch parameters) to time.

A backend registered with ``tune={"BLOCK": [256, 1024], "num_warps": [4, 8]}``
contributes one candidate per combination of the values; a backend without tunable
parameters contributes one. Order matters when a budget cuts the list: every
backend's *default* (its first values) comes first, in registration order, then the
remaining combinations backend by backend in turn, so a cut list still compares
every backend.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..dispatch.records import Choice

__all__ = ["Candidate", "count_candidates", "enumerate_candidates"]

#: ``backend -> ((name, candidate values), ...)``: what a primitive registered.
Tunables = Mapping[str, Sequence[tuple[str, Sequence[Any]]]]

#: One backend with one value of each of its launch parameters (a table's
#: :class:`~polykernel.dispatch.Choice`: the tuner and the table share the record).
Candidate = Choice


def _combinations(
    backend: str, spec: Sequence[tuple[str, Sequence[Any]]]
) -> Iterator[Choice]:
    names = [name for name, _ in spec]
    for values in itertools.product(*(v for _, v in spec)):
        yield Choice.of(backend, zip(names, values, strict=True))


def count_candidates(tunables: Tunables) -> int:
    """How many candidates ``tunables`` has (without listing them)."""
    return sum(math.prod(len(v) for _, v in spec) for spec in tunables.values())


def _ordered(tunables: Tunables) -> Iterator[Choice]:
    streams = [_combinations(b, spec) for b, spec in tunables.items()]
    firsts = [next(s) for s in streams]
    yield from firsts
    for batch in itertools.zip_longest(*streams):
        yield from (c for c in batch if c is not None)


def enumerate_candidates(
    tunables: Tunables, max_candidates: int | None = None
) -> tuple[list[Candidate], int]:
    """``(kept, n_cut)``: the first ``max_candidates`` candidates of ``tunables``
    in the order above (all when None) and how many were left out (never listed:
    a grid of 300 x 300 values is not materialised to keep 3).

    Example:
        >>> from polykernel.tuning.candidates import enumerate_candidates
        >>> kept, cut = enumerate_candidates(
        ...     {"numba": [("parallel", [False, True])], "jax_raw": []}, 2)
        >>> [c.label for c in kept], cut
        (['numba(parallel=False)', 'jax_raw'], 1)
    """
    total = count_candidates(tunables)
    limit = total if max_candidates is None else min(max_candidates, total)
    return list(itertools.islice(_ordered(tunables), limit)), total - limit
