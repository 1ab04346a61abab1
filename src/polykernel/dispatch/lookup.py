"""Which table entry answers a call: fresh entries only, exact bucket, nearest, family.

An entry is *fresh* when every kernel it measured is registered now with the same
identity (:mod:`.identity`) and its winner is a choice the primitive can make
(a registered backend, launch-parameter values among its candidates); otherwise it
is *stale* (:func:`stale_reason` says why): reported (by ``explain_dispatch``,
``polykernel tune --show`` and ``--report``), never used. The decision checks each
entry once and hands only fresh ones to :func:`tuned_entry` and
:func:`saved_default`. Among fresh tuned entries of the call's platform and
signature: the same device kind and the exact bucket, else the nearest bucket on
that device kind, else the same family (exact, then nearest). A bucket equally far
from several tuned ones gets the candidate every one of them measured correct whose
worst ratio over them is the best, by the one rule of :mod:`.ranking`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import values
from .precedence import Reason
from .ranking import Scored, choose
from .records import ANY, Choice, Entry, Key, Scope

__all__ = [
    "Registered",
    "relevant",
    "saved_default",
    "stale_reason",
    "tuned_entry",
]

#: ``((name, (candidate, ...)), ...)``: a backend's launch parameters.
Spec = tuple[tuple[str, tuple[Any, ...]], ...]


@dataclasses.dataclass(frozen=True)
class Registered:
    """A primitive's kernels on one platform, as plain data.

    Attributes:
        primitive: the primitive's name.
        platform: the platform.
        kernels: ``backend -> its launch parameters``, in registration order.
        default: the registered default (``asdefault=True``, else the first).
        runtime_default: the backend ``set_default`` chose, if any.
        identity: ``backend -> its kernel identity`` (asked only when an entry
            needs checking; the caller caches it).
        platforms: the platforms the primitive has kernels for (for messages).
    """

    primitive: str
    platform: str
    kernels: Mapping[str, Spec]
    default: str
    runtime_default: str | None = None
    identity: Callable[[str], str] = lambda backend: ""
    platforms: tuple[str, ...] = ()

    def default_choice(self, backend: str | None = None) -> Choice:
        """``backend`` (default: the registered default) with its first values."""
        backend = backend or self.default
        return Choice.of(backend, {n: c[0] for n, c in self.kernels.get(backend, ())})

    def valid(self, choice: Choice) -> bool:
        """Whether ``choice`` is one this primitive can make now."""
        spec = self.kernels.get(choice.backend)
        if spec is None:
            return False
        declared = {n: {values.token(v) for v in c} for n, c in spec}
        given = dict(choice.params)
        return set(given) == set(declared) and all(
            values.token(v) in declared[n] for n, v in given.items()
        )


def _kernels_changed(entry: Entry, registered: Registered) -> str | None:
    if entry.kernels is None:  # a legacy saved default: it names a backend only
        return None
    if not entry.kernels:
        return "it did not record the kernels it measured (an older table)"
    for backend, identity in entry.kernels:
        if backend not in registered.kernels:
            return f"it measured backend '{backend}', which is not registered now"
        if registered.identity(backend) != identity:
            return f"the '{backend}' kernel changed since it was measured"
    return None


def stale_reason(entry: Entry, registered: Registered) -> str | None:
    """Why ``entry`` cannot be used for ``registered``'s kernels, or None."""
    changed = _kernels_changed(entry, registered)
    if changed is not None:
        return changed
    if entry.scope == Scope.SAVED:
        if entry.winner.backend not in registered.kernels:
            return f"its backend '{entry.winner.backend}' is not registered now"
        return None
    if not registered.valid(entry.winner):
        return f"its winner {entry.winner.label} is not a choice the primitive has now"
    return None


def _distance(a: Sequence[int], b: Sequence[int]) -> int:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def _nearest(
    entries: list[Entry], key: Key, registered: Registered
) -> tuple[Entry, bool] | None:
    assert key.bucket is not None
    fitting = [
        e
        for e in entries
        if e.key.bucket is not None and len(e.key.bucket) == len(key.bucket)
    ]
    if not fitting:
        return None
    distance = {id(e): _distance(e.key.bucket or (), key.bucket) for e in fitting}
    least = min(distance.values())
    tied = [e for e in fitting if distance[id(e)] == least]
    if least == 0 or len(tied) == 1:
        return tied[0], least == 0
    return _between(tied, registered), False


def _between(tied: list[Entry], registered: Registered) -> Entry:
    """For a bucket between tuned ones: the candidate all of them measured correct
    whose worst ratio over them wins by the one rule (the default kept when it is
    within the spread) — fast on both sides, not one side's winner."""
    measured = [e.ratios() for e in tied]
    shared = set.intersection(*(set(m) for m in measured))
    order = [m.choice.token() for m in tied[0].measured if m.choice.token() in shared]
    scored = [
        Scored(measured[0][t][1], max(m[t][0] for m in measured))
        for t in order
        if registered.valid(measured[0][t][1])
    ]
    picked = choose(scored, default=registered.default_choice())
    if picked is None or picked.item == tied[0].winner:
        return tied[0]
    return dataclasses.replace(tied[0], winner=picked.item)


def tuned_entry(
    key: Key, entries: Sequence[Entry], registered: Registered
) -> tuple[Entry, Reason] | None:
    """The tuned entry of ``entries`` (fresh ones: the caller set the stale ones
    aside) answering ``key``, and how it matched."""
    same = [
        e
        for e in entries
        if e.scope == Scope.TUNED
        and e.key.platform == key.platform
        and e.key.signature == key.signature
    ]
    found = _nearest([e for e in same if e.key.device == key.device], key, registered)
    if found is not None:
        return found[0], Reason.EXACT if found[1] else Reason.NEAREST
    found = _nearest([e for e in same if e.key.family == key.family], key, registered)
    if found is not None:
        return found[0], Reason.FAMILY
    return None


def saved_default(key: Key, entries: Sequence[Entry]) -> Entry | None:
    """The saved default of ``entries`` (fresh ones) for ``key``'s platform: this
    device kind's, else one saved for any device."""
    saved = [
        e for e in entries if e.scope == Scope.SAVED and e.key.platform == key.platform
    ]
    for device in (key.device, ANY):
        for e in saved:
            if e.key.device == device:
                return e
    return None


def relevant(key: Key, entries: Sequence[Entry]) -> list[Entry]:
    """The entries that could answer ``key`` if they were fresh."""
    return [
        e
        for e in entries
        if e.key.platform == key.platform
        and (
            e.scope == Scope.SAVED
            or (e.key.signature == key.signature and key.family in (e.key.family, ANY))
        )
    ]
