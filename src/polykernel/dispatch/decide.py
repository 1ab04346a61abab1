"""The decision: which backend and launch parameters one lowering uses, and why.

:func:`decide` is the only place that decides. It takes plain data — the call
(its key, its ``backend=``, its keywords), the primitive's registered kernels
(:class:`~.lookup.Registered`), the ``set_backend`` preference and the table's
entries — and applies the precedence of :mod:`.precedence` level by level, in one
numbered place. It reads nothing and writes nothing: the core gathers the data
(``XLACustomKernel._decide``), and what follows from a decision (a miss counted,
a warning) is :mod:`.notices`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import KernelFallbackExhaustedError, UnknownBackendError
from . import describe, values
from .lookup import Registered, relevant, saved_default, stale_reason, tuned_entry
from .precedence import Reason, level_of
from .records import Choice, Entry, Key

__all__ = ["Call", "Dispatch", "decide"]


@dataclasses.dataclass(frozen=True)
class Call:
    """What a lowering knows of the call: its key, its ``backend=`` argument and
    its keywords (a launch parameter among them wins over any tuned value)."""

    key: Key
    backend: str | None = None
    keywords: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Dispatch:
    """One decision: the backend and launch parameters a lowering uses, and why.

    It prints as one line (``str``, and a shorter ``repr``); :meth:`details` says
    why in full, within 100 columns.

    Attributes:
        primitive: the primitive's name.
        platform: the platform lowered for.
        backend: the backend chosen.
        params: the launch parameters its generator gets — the tuned (or first)
            value of each, or the call's own where it passed one (named in
            ``from_call``).
        reason: a :class:`~polykernel.dispatch.Reason` (a string: ``explicit``,
            ``preference``, ``set_default``, ``exact``, ``nearest``, ``family``,
            ``saved_default``, ``default``).
        key: what was looked up.
        entry: the table entry used, if any.
        level: the precedence level that decided (1-6, see ``docs/tuning.md``).
        stale: entries that would have answered but whose kernels changed since
            they were measured, each with why (never used).
        ignored_preference: a ``set_backend`` choice this primitive did not
            register (so it fell through).
        from_call: the launch parameters the call passed itself.
        agreed: in a ``jax.distributed`` job, where the table decided from came
            from (the job's agreed table, or the untuned defaults); None: this
            process's own tables.
        job_fallback: why the job uses the untuned defaults (None: it agreed, or
            this process runs alone).
    """

    primitive: str
    platform: str
    backend: str
    params: Mapping[str, Any]
    reason: Reason
    key: Key
    entry: Entry | None = None
    level: int = 6
    stale: tuple[tuple[Entry, str], ...] = ()
    ignored_preference: str | None = None
    from_call: tuple[str, ...] = ()
    agreed: str | None = None
    job_fallback: str | None = None

    def __str__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
        where = ""
        if self.entry is not None and self.entry.key.bucket is not None:
            measured = self.entry.recorded.get("shape", list(self.entry.key.bucket))
            where = f" (tuned on {self.entry.key.device}, shape {measured})"
        elif self.entry is not None:
            where = f" (saved from {self.entry.source or 'a benchmark'})"
        n = len(self.stale)
        stale = f"; {n} stale entr{'y' if n == 1 else 'ies'} not used" if n else ""
        job = ""
        if self.agreed is not None:
            job = f"; from {self.agreed}"
            if self.job_fallback is not None:
                job += f" ({self.job_fallback})"
        return (
            f"{self.primitive} on {self.platform}: {self.backend}"
            f"({params}) [{self.reason.value}]{where}{stale}{job}"
        )

    def __repr__(self) -> str:
        # One line: the dataclass repr printed the entry with every candidate it
        # measured (some 2,000 characters); the long form is details().
        return describe.short(self)

    def details(self, width: int = describe.WIDTH) -> str:
        """The decision in words, within ``width`` columns: the precedence level
        that decided, each launch parameter and where it came from (``given``,
        ``tuned``, ``default``), the key looked up, the entry used, the stale
        entries passed over."""
        return describe.details(self, width)


def _no_kernel(registered: Registered) -> KernelFallbackExhaustedError:
    return KernelFallbackExhaustedError(
        f"XLACustomKernel '{registered.primitive}' has no kernel for platform "
        f"'{registered.platform}' (platforms with kernels: "
        f"{list(registered.platforms)}). Register one with def_kernel(backend, "
        f"'{registered.platform}', generator), or run on one of those platforms."
    )


def _unknown(registered: Registered, backend: str) -> UnknownBackendError:
    return UnknownBackendError(
        f"XLACustomKernel '{registered.primitive}': backend '{backend}' is not "
        f"registered for platform '{registered.platform}' (registered: "
        f"{list(registered.kernels)}). Pass one of those as backend=..., or "
        f"register '{backend}' for '{registered.platform}'."
    )


def _params(
    registered: Registered,
    backend: str,
    tuned: Choice | None,
    keywords: Mapping[str, Any],
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Each launch parameter of ``backend``: the call's own value, else the tuned
    one (when it is still a candidate), else the first candidate."""
    chosen = dict(tuned.params) if tuned is not None else {}
    params, from_call = {}, []
    for name, candidates in registered.kernels.get(backend, ()):
        if name in keywords:
            params[name] = keywords[name]
            from_call.append(name)
        elif name in chosen and values.token(chosen[name]) in {
            values.token(c) for c in candidates
        }:
            params[name] = chosen[name]
        else:
            params[name] = candidates[0]
    return params, tuple(from_call)


def decide(
    call: Call,
    registered: Registered,
    preference: str | None,
    entries: Sequence[Entry],
) -> Dispatch:
    """The decision for ``call`` (see :mod:`.precedence` for the levels).

    Raises:
        KernelFallbackExhaustedError: the primitive has no kernel on the platform.
        UnknownBackendError: the call named a backend not registered there.
    """
    if not registered.kernels:
        raise _no_kernel(registered)
    key = call.key
    # Each entry that could answer is checked once: the stale ones are reported,
    # the fresh ones looked up.
    checked = [(e, stale_reason(e, registered)) for e in relevant(key, entries)]
    stale = tuple((e, why) for e, why in checked if why is not None)
    fresh = [e for e, why in checked if why is None]
    tuned = tuned_entry(key, fresh, registered)
    ignored = None

    # 1. the call's backend=; 2. set_backend; 3. set_default: the backend only.
    chosen: tuple[str, Reason] | None = None
    if call.backend is not None:
        if call.backend not in registered.kernels:
            raise _unknown(registered, call.backend)
        chosen = (call.backend, Reason.EXPLICIT)
    elif preference is not None and preference in registered.kernels:
        chosen = (preference, Reason.PREFERENCE)
    elif registered.runtime_default is not None:
        chosen = (registered.runtime_default, Reason.SET_DEFAULT)
    if (
        preference is not None
        and preference not in registered.kernels
        and call.backend is None
    ):
        ignored = preference
    if chosen is not None:
        backend, reason = chosen
        entry = tuned[0] if tuned is not None else None
        best = entry.best_of(backend) if entry is not None else None
        return _decision(
            call,
            registered,
            backend,
            reason,
            entry if best else None,
            best,
            stale,
            ignored,
        )

    # 4. a tuned entry: exact bucket, nearest, same family.
    if tuned is not None:
        entry, reason = tuned
        return _decision(
            call,
            registered,
            entry.winner.backend,
            reason,
            entry,
            entry.winner,
            stale,
            ignored,
        )

    # 5. a saved default; 6. the registered default.
    saved = saved_default(key, fresh)
    if saved is not None:
        winner = saved.winner if registered.valid(saved.winner) else None
        return _decision(
            call,
            registered,
            saved.winner.backend,
            Reason.SAVED,
            saved,
            winner,
            stale,
            ignored,
        )
    return _decision(
        call, registered, registered.default, Reason.DEFAULT, None, None, stale, ignored
    )


def _decision(
    call: Call,
    registered: Registered,
    backend: str,
    reason: Reason,
    entry: Entry | None,
    tuned: Choice | None,
    stale: tuple[tuple[Entry, str], ...],
    ignored: str | None,
) -> Dispatch:
    params, from_call = _params(registered, backend, tuned, call.keywords)
    return Dispatch(
        registered.primitive,
        registered.platform,
        backend,
        params,
        reason,
        call.key,
        entry,
        level_of(reason).number,
        stale,
        ignored,
        from_call,
    )
