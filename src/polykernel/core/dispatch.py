"""Measured dispatch: which backend and launch parameters a lowering uses, and why.

At lowering time (never per call: the choice is what gets compiled), a call that
does not name its backend looks its key up in the tuned tables
(:mod:`polykernel.settings.tuned_table`):

1. the same device kind (CPU model and core count, GPU name) and the exact shape
   bucket (``exact``), else the nearest tuned bucket on that device kind
   (``nearest``; a bucket halfway between tuned ones gets the candidate closest to
   the best on both sides);
2. else the same family — CPU instruction set, GPU compute capability — exact
   bucket, else nearest (``family``);
3. else today's default (``default``: the persisted ``--save-defaults`` choice or
   the first registered backend), counted as a miss.

``backend=``, ``polykernel.set_backend`` and ``set_default`` always win
(``explicit``, ``preference``, ``set_default``); a tuned entry still supplies the
launch parameters measured best for that backend. A keyword the call passes itself
wins over any tuned value, and a tunable parameter nothing chose gets its first
candidate. :func:`decide` is a pure lookup: :meth:`XLACustomKernel.dispatch` and
:func:`explain` show a decision without running anything.

The key: the input dtypes and ranks and the categorical static keywords (bools,
strings, None) form the *signature*; the shape *bucket* is, per input dimension,
``ceil(log2(size))`` — or what the primitive's own bucketing function returns.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import TuningWarning
from ..settings.host import host_cpu
from ..settings.preferences import get_tuning_miss_warnings
from ..settings.tuned_table import Choice, Key, TunedEntry, entries_for

__all__ = [
    "Dispatch",
    "decide",
    "device_identity",
    "make_key",
    "misses",
]

#: Why a decision was taken, best-informed first.
REASONS = (
    "explicit",
    "preference",
    "set_default",
    "exact",
    "nearest",
    "family",
    "default",
)


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """One decision: the backend and parameters a lowering uses, and why.

    Attributes:
        primitive: the primitive's name.
        platform: the platform lowered for.
        backend: the backend chosen.
        params: the launch parameters the generator gets (tuned or first candidate;
            keywords the call passed itself are not repeated here).
        reason: one of :data:`REASONS`.
        key: what was looked up.
        entry: the tuned entry used, if any.
    """

    primitive: str
    platform: str
    backend: str
    params: Mapping[str, Any]
    reason: str
    key: Key
    entry: TunedEntry | None = None

    def __str__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
        where = ""
        if self.entry is not None:
            measured = self.entry.recorded.get("shape", self.entry.key.bucket)
            where = f" (tuned on {self.entry.key.device}, shape {measured})"
        return (
            f"{self.primitive} on {self.platform}: {self.backend}"
            f"({params}) [{self.reason}]{where}"
        )


# -- the machine -----------------------------------------------------------------------
def device_identity(platform: str) -> tuple[str, str]:
    """``(device kind, family)`` of the device a lowering for ``platform`` targets.

    CPU: the model with its core count, and the instruction set; GPU: the device
    kind and ``sm_<compute capability>``.

    Example:
        >>> from polykernel.core.dispatch import device_identity
        >>> device, family = device_identity("cpu")
        >>> "cores" in device
        True
    """
    if platform == "cpu":
        cpu = host_cpu()
        return f"{cpu.model} ({os.cpu_count()} cores)", cpu.family
    import jax

    try:
        device = jax.devices(platform)[0]
    except RuntimeError:
        return "unknown", "unknown"
    capability = getattr(device, "compute_capability", None)
    family = (
        f"sm_{str(capability).replace('.', '')}" if capability else device.device_kind
    )
    return device.device_kind, family


# -- the key ---------------------------------------------------------------------------
def _categorical(value: Any) -> bool:
    if isinstance(value, bool | str) or value is None:
        return True
    if isinstance(value, tuple) and value:
        return all(_categorical(v) for v in value)
    return False


def signature(avals: Sequence[Any], params: Mapping[str, Any]) -> str:
    """Input dtypes and ranks and the categorical statics, as one canonical string."""
    ins = [f"{np.dtype(a.dtype).name}[{len(a.shape)}]" for a in avals]
    statics = {k: v for k, v in sorted(params.items()) if _categorical(v)}
    return json.dumps({"in": ins, "static": statics}, sort_keys=True)


def default_bucket(avals: Sequence[Any]) -> tuple[int, ...]:
    """Per input dimension, ``ceil(log2(size))`` (0 for sizes 0 and 1)."""
    return tuple(
        max(0, math.ceil(math.log2(d))) if d > 1 else 0 for a in avals for d in a.shape
    )


def make_key(
    primitive: str,
    platform: str,
    avals: Sequence[Any],
    outs: Sequence[Any],
    params: Mapping[str, Any],
    bucketer: Callable[..., Sequence[int]] | None = None,
) -> Key:
    """The key a call with input ``avals`` and static ``params`` looks up."""
    device, family = device_identity(platform)
    if bucketer is None:
        bucket = default_bucket(avals)
    else:
        bucket = tuple(
            int(b) for b in bucketer(ins=tuple(avals), outs=tuple(outs), **params)
        )
    return Key(primitive, platform, device, family, signature(avals, params), bucket)


# -- the lookup ------------------------------------------------------------------------
def _distance(a: Sequence[int], b: Sequence[int]) -> int:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True))


def _nearest(
    entries: list[TunedEntry], key: Key, usable: Callable[[str], bool]
) -> tuple[TunedEntry, bool] | None:
    """The entry of ``entries`` with ``key``'s bucket, else the nearest one; when
    several are equally near (the bucket lies between tuned ones), the candidate
    closest to the best in all of them (:func:`_between`)."""
    fitting = [e for e in entries if len(e.key.bucket) == len(key.bucket)]
    if not fitting:
        return None
    least = min(_distance(e.key.bucket, key.bucket) for e in fitting)
    tied = [e for e in fitting if _distance(e.key.bucket, key.bucket) == least]
    if least == 0 or len(tied) == 1:
        return tied[0], least == 0
    return _between(tied, usable), False


def _ratios(entry: TunedEntry) -> dict[tuple[str, tuple], tuple[float, Choice]]:
    """``(backend, params) -> (time relative to the entry's fastest, choice)`` for
    every candidate the entry measured correct (a table without ratios: from the
    medians)."""
    ok = [
        c
        for c in entry.candidates
        if c.get("status") == "ok" and isinstance(c.get("median_s"), int | float)
    ]
    fastest = min((float(c["median_s"]) for c in ok), default=0.0)
    found = {}
    for c in ok:
        choice = Choice.from_json(c)
        ratio = c.get("ratio")
        if not isinstance(ratio, int | float):
            ratio = choice.median_s / fastest if fastest > 0 else 1.0
        found[(choice.backend, choice.params)] = (float(ratio), choice)
    return found


def _between(tied: list[TunedEntry], usable: Callable[[str], bool]) -> TunedEntry:
    """For a bucket between tuned ones: the candidate every one of them measured
    correct whose worst ratio to their fastest is the smallest — the one that is
    fast on both sides, not the winner of one side (the first entry, the user's
    table before shipped ones, when they share no candidate)."""
    measured = [_ratios(e) for e in tied]
    shared = set.intersection(*(set(m) for m in measured))
    usable_shared = sorted((c for c in shared if usable(c[0])), key=repr)
    if not usable_shared:
        return tied[0]
    candidate = min(usable_shared, key=lambda c: max(m[c][0] for m in measured))
    if candidate == (tied[0].best.backend, tuple(sorted(tied[0].best.params))):
        return tied[0]
    return dataclasses.replace(tied[0], best=measured[0][candidate][1])


def lookup(key: Key, usable: Callable[[str], bool]) -> tuple[TunedEntry, str] | None:
    """The tuned entry for ``key`` and how it matched (``exact``, ``nearest``,
    ``family``), considering entries whose winner ``usable`` accepts."""
    same = [
        e
        for e in entries_for(key.primitive)
        if e.key.platform == key.platform
        and e.key.signature == key.signature
        and usable(e.best.backend)
    ]
    found = _nearest([e for e in same if e.key.device == key.device], key, usable)
    if found is not None:
        return found[0], "exact" if found[1] else "nearest"
    found = _nearest([e for e in same if e.key.family == key.family], key, usable)
    if found is not None:
        return found[0], "family"
    return None


def decide(
    key: Key,
    chosen: str,
    how: str,
    registered: Mapping[str, Sequence[tuple[str, Sequence[Any]]]],
) -> Dispatch:
    """The decision for ``key``.

    Args:
        key: what the call looks up.
        chosen: the backend the kernel table resolved without tuning.
        how: why the table chose it: ``explicit``, ``preference``, ``set_default``
            or ``default`` (the only one tuning may override).
        registered: backend -> its tunable parameters ``(name, candidates)``, for
            every backend registered on the platform.
    """
    found = lookup(key, lambda b: b in registered)
    if how != "default":
        choice = found[0].per_backend.get(chosen) if found else None
        params = dict(choice.params) if choice else {}
        return _decision(key, chosen, how, registered, params, found)
    if found is None:
        _count_miss(key, registered)
        return _decision(key, chosen, "default", registered, {}, None)
    entry, match = found
    return _decision(
        key, entry.best.backend, match, registered, dict(entry.best.params), found
    )


def _decision(
    key: Key,
    backend: str,
    reason: str,
    registered: Mapping[str, Sequence[tuple[str, Sequence[Any]]]],
    tuned: dict[str, Any],
    found: tuple[TunedEntry, str] | None,
) -> Dispatch:
    tunable = registered.get(backend, ())
    # A tuned value that is no longer a candidate (the generator changed) is not used.
    params = {
        name: tuned[name] if tuned.get(name, object()) in values else values[0]
        for name, values in tunable
    }
    entry = (
        found[0]
        if found
        and (found[0].per_backend.get(backend) or found[0].best.backend == backend)
        else None
    )
    return Dispatch(key.primitive, key.platform, backend, params, reason, key, entry)


# -- misses ----------------------------------------------------------------------------
_lock = threading.Lock()
_misses: dict[Key, int] = {}


def misses() -> dict[Key, int]:
    """How many lowerings of each key found no tuned entry in this process."""
    with _lock:
        return dict(_misses)


def _count_miss(key: Key, registered: Mapping[str, Sequence[Any]]) -> None:
    informed = len(registered) > 1 or any(registered.values())
    if not informed:  # one backend, nothing to tune: not a miss
        return
    with _lock:
        first = key not in _misses
        _misses[key] = _misses.get(key, 0) + 1
    if first and get_tuning_miss_warnings():
        warnings.warn(
            f"polykernel: no tuned entry for '{key.primitive}' on {key.platform} "
            f"({key.device}, bucket {list(key.bucket)}, {key.signature}); using the "
            f"default backend. Tune it with `polykernel tune MODULE:NAME` or "
            f"op.tune() (warned once per key).",
            TuningWarning,
            stacklevel=2,
        )
