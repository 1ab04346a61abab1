"""What ``--save-defaults`` saves: a benchmark's winners as saved-default entries.

A benchmark run compares a primitive's backends (each with its default launch
parameters) on the same data. Its winner per (primitive, platform) — by the one rule
of :mod:`polykernel.dispatch.ranking`, the tuner's — is saved to the one table of
measured choices as a *saved default* (:class:`~polykernel.dispatch.Scope`
``SAVED``): used for any shape on this device kind when no tuned entry answers,
below ``set_default`` and tuned entries, above the registered default.

Like every entry it records the identity of the kernels it measured, which
:func:`kernel_set` takes from the primitive when the run starts; records that were
not measured by a run of this process (built by hand, read from a file) carry
none, and are not saved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..dispatch.key import device_identity
from ..dispatch.ranking import choose
from ..dispatch.records import ANY, Choice, Entry, Key, Measurement, Scope
from ..errors import BenchmarkValueError
from .ranking import backend_scores
from .record import BenchmarkRecord

__all__ = ["KernelSet", "kernel_set", "save_defaults", "saved_entries"]


@dataclasses.dataclass(frozen=True)
class KernelSet:
    """The kernels one benchmark run measured: the registered default backend,
    each backend's default choice and each kernel's identity."""

    default: str
    choices: Mapping[str, Choice]
    identities: Mapping[str, str]


def kernel_set(kernel: Any, platform: str, backends: Sequence[str]) -> KernelSet | None:
    """What ``kernel`` (an ``XLACustomKernel``) has registered for ``backends`` on
    ``platform``; None for an object that is not one."""
    registered = getattr(kernel, "_registered", None)
    if registered is None:
        return None
    found = registered(platform)
    return KernelSet(
        found.default,
        {b: found.default_choice(b) for b in backends if b in found.kernels},
        {b: found.identity(b) for b in backends if b in found.kernels},
    )


def saved_entries(
    records: Iterable[BenchmarkRecord],
    kernels: Mapping[tuple[str, str], KernelSet],
    machine: Mapping[str, Any] | None = None,
) -> list[Entry]:
    """One saved-default entry per (primitive, platform) of ``records``.

    Raises:
        BenchmarkValueError: a group whose kernels are not known (records not
            measured by a run of this process).
    """
    groups: dict[tuple[str, str], list[BenchmarkRecord]] = {}
    for r in records:
        groups.setdefault((r.primitive, r.platform), []).append(r)
    unknown = sorted(g for g in groups if g not in kernels and g[0])
    if unknown:
        raise BenchmarkValueError(
            f"save_defaults: the records of {unknown} were not measured by a benchmark "
            f"run of this process, so the kernels they measured are not known; run "
            f"op.benchmark(...) (or `polykernel benchmark ... --save-defaults`) and "
            f"save its result."
        )
    entries = []
    for (primitive, platform), recs in groups.items():
        if not primitive:
            continue
        known = kernels[(primitive, platform)]
        scored = [s for s in backend_scores(recs) if s.item in known.choices]
        picked = choose(scored, default=known.default)
        if picked is None:
            continue
        device, family = device_identity(platform)
        measured = tuple(
            Measurement(known.choices[s.item], "ok", ratio=s.ratio, ratio_error=s.error)
            for s in scored
        )
        entries.append(
            Entry(
                Key(primitive, platform, device, family, ANY, None),
                Scope.SAVED,
                known.choices[picked.item],
                known.choices.get(known.default),
                tuple(sorted((b, known.identities[b]) for b in known.choices)),
                measured,
                {
                    "configs": sorted({r.label for r in recs}),
                    "machine": dict(machine or {}),
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                },
            )
        )
    return entries


def save_defaults(
    records: Iterable[BenchmarkRecord],
    kernels: Mapping[tuple[str, str], KernelSet],
    machine: Mapping[str, Any] | None = None,
) -> dict[str, dict[str, str]]:
    """Record :func:`saved_entries` in the user's table; return
    ``{primitive: {platform: backend}}``."""
    from ..dispatch.writing import record_entries

    entries = saved_entries(records, kernels, machine)
    if entries:
        record_entries(entries)
    chosen: dict[str, dict[str, str]] = {}
    for e in entries:
        chosen.setdefault(e.key.primitive, {})[e.key.platform] = e.winner.backend
    return chosen
