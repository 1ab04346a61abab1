"""One job, one table: the processes of a ``jax.distributed`` job agree on what
their decisions read.

Alone, a process decides from its own tables. In a job of several processes each
lowers its own copy of the program, and tables that differ (node-local config
directories, a host tuned yesterday and one never tuned, different core counts)
would make them lower different kernels for the same call: results that must
stay bit-identical across replicas would drift apart. So, the first time a
primitive is lowered for a platform, the processes agree, through the job's
key-value store (:mod:`.store`), on one *view*: the entries every decision for it
reads and the device identity its keys name.

1. Every process publishes its *part*: its entries for the primitive (every
   table it reads), its device identity and the identity of each registered
   kernel (:mod:`.identity`: code and package versions).
2. Process 0, the leader, gathers the parts within :func:`timeout_s`. When all
   came and every process has the same kernels, the view is the union of the
   entries (for one case, the lowest process's entry) with the leader's device
   identity; otherwise the job falls back to the untuned defaults, with why.
3. That outcome is *claimed* under one key (:meth:`.store.JobStore.claim`): the
   first writer wins. A process that waited one and a half timeouts for it
   claims the fallback itself. Every process follows what the key holds, so no
   process decides alone: all use the view, or all fall back — together, within
   a bound, with one :class:`~polykernel.errors.JobFallbackWarning` each.

A view is kept for the job's life; :func:`forget` (every process, after a tuning
run of the whole job) makes the next lowering agree again. The store failing
outright is the one case a process falls back on its own (and says so).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from .. import _jax_compat
from ..errors import TuningValueError
from ..warning_types import JobFallbackWarning
from .lookup import Registered
from .records import Entry
from .store import JobStore, StoreGone, component, get_blob, put_blob
from .table import tuned_path

__all__ = [
    "TIMEOUT_ENV",
    "View",
    "agreed_view",
    "forget",
    "job_store",
    "timeout_s",
]

TIMEOUT_ENV = "POLYKERNEL_JOB_TIMEOUT"
#: The leader gathers the parts for this long by default; the others wait one
#: and a half times it for the outcome (45 s): all fall back within 60 s.
DEFAULT_TIMEOUT_S = 30.0
#: A process waits this many timeouts for the leader's outcome.
FOLLOWER_FACTOR = 1.5


def timeout_s() -> float:
    """The agreement's timeout (``$POLYKERNEL_JOB_TIMEOUT`` seconds, default 30).

    Raises:
        TuningValueError: the variable is not a number of seconds in (0, 3600].
    """
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value <= 3600:
        raise TuningValueError(
            f"polykernel: ${TIMEOUT_ENV}={raw!r} is not a number of seconds in "
            f"(0, 3600]; set it to e.g. 30 (the default), or unset it."
        )
    return value


def job_store() -> JobStore | None:
    """The store of this process's ``jax.distributed`` job (None: it runs alone)."""
    job = _jax_compat.distributed_job()
    return None if job is None else JobStore(*job)


@dataclasses.dataclass(frozen=True)
class View:
    """What one primitive's decisions on one platform read in a job.

    Attributes:
        entries: the agreed entries (none when the job fell back).
        device: the job's device identity for the platform (the leader's).
        origin: where a decision's table came from, in words.
        fallback: why the job uses the untuned defaults (None: it agreed).
    """

    entries: tuple[Entry, ...]
    device: tuple[str, str]
    origin: str
    fallback: str | None = None


_lock = threading.Lock()
_views: dict[tuple[str, str], View] = {}
_generation: dict[str, int] = {}


def forget(primitive: str) -> None:
    """Agree again on ``primitive``'s view at its next lowering (call it on every
    process of the job at the same point: after a tuning run of the whole job)."""
    with _lock:
        _generation[primitive] = _generation.get(primitive, 0) + 1
        for key in [k for k in _views if k[0] == primitive]:
            del _views[key]


def agreed_view(
    registered: Registered,
    local: Callable[[], Sequence[Entry]],
    device: tuple[str, str],
) -> View | None:
    """The job's view for ``registered``'s primitive and platform (None: this
    process runs alone). ``local()`` gives this process's own entries and
    ``device`` its device identity; both are asked only to agree."""
    store = job_store()
    if store is None:
        return None
    name, platform = registered.primitive, registered.platform
    with _lock:
        found = _views.get((name, platform))
        generation = _generation.get(name, 0)
    if found is not None:
        return found
    round_key = f"agree/{component(name)}/{platform}/{generation}"
    try:
        part = _part(store, registered, local(), device)
        view = _agree(store, round_key, part, device)
    except StoreGone as err:
        view = View((), device, "this process's defaults", f"the job's store failed "
                    f"({str(err)[:160]})")  # fmt: skip
    if view.fallback is not None:
        _warn(name, platform, view.fallback)
    with _lock:
        _views.setdefault((name, platform), view)
        return _views[(name, platform)]


def _part(
    store: JobStore,
    registered: Registered,
    entries: Sequence[Entry],
    device: tuple[str, str],
) -> dict[str, Any]:
    return {
        "process": store.index,
        "device": list(device),
        "kernels": {b: registered.identity(b) for b in registered.kernels},
        "entries": [
            e.to_json() | {"primitive": e.key.primitive, "tier": _tier(e)}
            for e in entries
        ],
    }


def _tier(entry: Entry) -> int:
    """0: the user's own table; 1: a shipped (or legacy) one. Every process's own
    entries come before any shipped one in the job's table."""
    return 0 if entry.source == str(tuned_path()) else 1


def _agree(
    store: JobStore, key: str, part: dict[str, Any], device: tuple[str, str]
) -> View:
    limit = timeout_s()
    start = time.monotonic()
    store.put(f"{key}/part/{store.index}", put_blob(store, key, _canonical(part)))
    if store.index == 0:
        outcome = _lead(store, key, part, start + limit, limit)
        held = store.claim(f"{key}/outcome", put_blob(store, key, outcome))
    else:
        ref, _ = store.wait(f"{key}/outcome", start + FOLLOWER_FACTOR * limit)
        if ref is None:
            why = (
                f"process {store.index} waited {FOLLOWER_FACTOR * limit:g} s for "
                f"process 0's table (${TIMEOUT_ENV}={limit:g})"
            )
            ref = store.claim(
                f"{key}/outcome", put_blob(store, key, _canonical({"fallback": why}))
            )
        held = ref
    text = get_blob(store, key, held, time.monotonic() + limit)
    if text is None:
        raise StoreGone(f"the outcome of {key} could not be read")
    return _view(json.loads(text), store, device)


def _lead(
    store: JobStore, key: str, own: dict[str, Any], deadline: float, limit: float
) -> str:
    """The leader's outcome: the merged table, or the fallback and why."""
    parts = [own]
    for index in range(1, store.count):
        ref, _ = store.wait(f"{key}/part/{index}", deadline)
        text = None if ref is None else get_blob(store, key, ref, deadline)
        if text is None:
            why = (
                f"process {index} did not take part within {limit:g} s "
                f"(${TIMEOUT_ENV}); every process of the job must lower the same "
                f"program"
            )
            return _canonical({"fallback": why})
        parts.append(json.loads(text))
    for part in parts[1:]:
        differs = sorted(
            b
            for b in set(own["kernels"]) | set(part["kernels"])
            if own["kernels"].get(b) != part["kernels"].get(b)
        )
        if differs:
            why = (
                f"process {part['process']}'s kernels {differs} differ from process "
                f"0's (other code or package versions); run the same software on "
                f"every process"
            )
            return _canonical({"fallback": why})
    merged: dict[str, dict[str, Any]] = {}
    # For each case: the users' own tables before shipped ones, then the lowest
    # process first.
    ranked = sorted(
        ((raw.get("tier", 1), part["process"], n, raw)
         for part in parts for n, raw in enumerate(part["entries"])),
        key=lambda item: item[:3],
    )  # fmt: skip
    for *_, raw in ranked:
        case = [raw.get(f) for f in ("scope", "platform", "device", "signature",
                                     "bucket")]  # fmt: skip
        merged.setdefault(json.dumps(case, sort_keys=True), raw)
    table = [merged[k] for k in sorted(merged)]
    digest = hashlib.sha256(_canonical(table).encode()).hexdigest()[:12]
    return _canonical(
        {"table": table, "device": own["device"], "digest": digest,
         "processes": store.count}
    )  # fmt: skip


def _view(outcome: dict[str, Any], store: JobStore, device: tuple[str, str]) -> View:
    if "fallback" in outcome:
        return View((), device, "the untuned defaults", str(outcome["fallback"]))
    origin = (
        f"the job's agreed table ({outcome['processes']} processes, digest "
        f"{outcome['digest']})"
    )
    entries = []
    for raw in outcome["table"]:
        try:
            entries.append(Entry.from_json(raw["primitive"], raw, origin))
        except (ValueError, TypeError, KeyError, AttributeError):
            continue  # every process skips the same ones
    job_device = tuple(outcome["device"])
    return View(tuple(entries), (job_device[0], job_device[1]), origin)


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


_warned: set[tuple[str, str, str]] = set()


def _warn(name: str, platform: str, why: str) -> None:
    with _lock:
        if (name, platform, why) in _warned:
            return
        _warned.add((name, platform, why))
    warnings.warn(
        f"polykernel: the processes of this jax.distributed job could not agree on "
        f"the tuned table of '{name}' on {platform}: {why}. Every process uses the "
        f"untuned default backend for it (same kernels everywhere, not tuned); fix "
        f"the cause and restart the job to use the tuned entries.",
        JobFallbackWarning,
        stacklevel=5,
    )
