"""``op.tune()`` in a ``jax.distributed`` job: tuned once per job, saved the same
everywhere.

Every process of the job calls ``tune()`` (it is a collective call, like the
program it tunes). Through the job's key-value store
(:mod:`polykernel.dispatch.store`) they:

1. **agree on the cases** — each publishes its vote (its host, its cases per
   platform with their operand shapes, its candidates); process 0 checks that
   the votes are the same program and *claims* the plan: each case, in order,
   goes to one process (round robin), whatever each process's own table holds;
2. **time their slice** — each process captures and first-calls only its
   cases, then times them on its own device. Processes that share CPU cores (on
   one host, with overlapping CPU affinity) take turns: a process times only after
   every process sharing its cores has
   finished its first calls and the one before it has finished timing, so no
   timing runs while another process of the job times on the same cores;
3. **exchange and save** — each publishes its entries and its own table; once
   all came, every process merges them in process order (a case answered by the
   lowest process; new entries over old) and writes that table whole: the same
   bytes on every process. Ties were already broken by the one ranking rule's
   fixed order, never by who measured.

A peer that stops beating (killed), a plan or result that does not come, or a
store that fails makes the job *fall back*: the first process to see it claims
the outcome ``fallback``, every process reads it within
:func:`~polykernel.dispatch.agreement.timeout_s` (or the beat's stall bound),
saves nothing, and warns once (:class:`~polykernel.errors.JobFallbackWarning`).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from ..dispatch.agreement import FOLLOWER_FACTOR, TIMEOUT_ENV, timeout_s
from ..dispatch.store import JobStore, StoreGone, component, get_blob, put_blob
from ..settings.host import usable_cores
from ..warning_types import JobFallbackWarning

__all__ = ["Fallback", "JobTuning"]

#: Every process writes its beat this often while it tunes.
BEAT_S = 0.5
#: A peer whose beat has not moved for this long (at most; or the job's timeout
#: when shorter) is taken for gone.
STALL_S = 10.0


class Fallback(Exception):
    """The job fell back (``why``); nothing is saved."""


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


class JobTuning:
    """One ``tune()`` call of one process of a job."""

    def __init__(self, store: JobStore, primitive: str, budget_s: float) -> None:
        self.store, self.primitive = store, primitive
        self.limit = timeout_s()
        self.stall = max(4 * BEAT_S, min(STALL_S, self.limit))
        self.started = time.monotonic()
        self.budget_s = budget_s
        self.prefix = f"tune/{component(primitive)}/{_next_round(primitive)}"
        self.host = socket.gethostname()
        self.hosts: dict[str, list[int]] = {}
        self.group = self.host
        self._beats: dict[int, tuple[str | None, float]] = {}
        self._stop = threading.Event()
        self._beat = threading.Thread(target=self._beating, daemon=True)

    # -- life ---------------------------------------------------------------------
    def __enter__(self) -> JobTuning:
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._beat.join(timeout=2 * BEAT_S)

    def _beating(self) -> None:
        count = 0
        while not self._stop.is_set():
            count += 1
            with contextlib.suppress(StoreGone):
                self.store.put(f"{self.prefix}/beat/{self.store.index}", str(count))
            self._stop.wait(BEAT_S)

    @property
    def index(self) -> int:
        return self.store.index

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    def _alive(self, peers: Sequence[int]) -> Any:
        """A check for :meth:`JobStore.wait`: why to stop waiting — the job's
        outcome is claimed already, or a peer's beat stalled."""

        def check() -> str | None:
            outcome = self.store.peek(self._key("outcome"))
            if outcome is not None:
                return "the job's outcome is decided"
            now = time.monotonic()
            for peer in peers:
                beat = self.store.peek(f"{self.prefix}/beat/{peer}")
                last, since = self._beats.get(peer, (None, now))
                if beat != last:
                    self._beats[peer] = (beat, now)
                elif now - since > self.stall:
                    return f"process {peer} stopped (no beat for {self.stall:g} s)"
            return None

        return check

    def _fail(self, why: str) -> Fallback:
        """Claim the fallback (unless an outcome is claimed) and return what every
        process will raise."""
        held = self.store.claim(self._key("outcome"), _canonical({"fallback": why}))
        return Fallback(json.loads(held).get("fallback", why))

    @contextlib.contextmanager
    def failing(self) -> Iterator[None]:
        """An error in this process (a kernel that raises, a table that cannot be
        read) makes the whole job fall back at once, then is raised here."""
        try:
            yield
        except (Fallback, StoreGone):
            raise
        except BaseException as err:
            with contextlib.suppress(StoreGone):
                self._fail(f"process {self.index} failed: {type(err).__name__}: "
                           f"{str(err)[:200]}")  # fmt: skip
            raise

    def _outcome(self) -> None:
        """Raise :class:`Fallback` when the job fell back already."""
        held = self.store.peek(self._key("outcome"))
        if held is not None and "fallback" in json.loads(held):
            raise Fallback(json.loads(held)["fallback"])

    # -- 1. the plan ----------------------------------------------------------------
    def plan(self, cases: dict[str, list[Any]], candidates: dict[str, Any]) -> dict:
        """``{platform: [process of each case]}``, as the leader claimed it.

        Raises:
            Fallback: the votes differ or do not come in time.
        """
        vote = {
            "process": self.index,
            "host": self.host,
            "cores": usable_cores(),
            "cases": {p: [_case(c) for c in cs] for p, cs in sorted(cases.items())},
            "candidates": candidates,
        }
        self.store.put(
            self._key(f"vote/{self.index}"),
            put_blob(self.store, self.prefix, _canonical(vote)),
        )
        deadline = time.monotonic() + self.limit
        others = [i for i in range(self.store.count) if i != self.index]
        if self.index == 0:
            plan = self._lead(vote, deadline, others)
            held = self.store.claim(self._key("outcome.plan"), _canonical(plan))
        else:
            got, why = self.store.wait(
                self._key("outcome.plan"),
                time.monotonic() + FOLLOWER_FACTOR * self.limit,
                self._alive([0]),
            )
            if got is None:
                why = why or "nothing came in time"
                raise self._fail(f"process {self.index} got no plan from process 0: "
                                 f"{why} (${TIMEOUT_ENV}={self.limit:g})")  # fmt: skip
            held = got
        plan = json.loads(held)
        if "fallback" in plan:
            raise self._fail(plan["fallback"])
        self.hosts = {h: list(r) for h, r in plan["hosts"].items()}
        self.group = next(
            (g for g, members in self.hosts.items() if self.index in members),
            self.host,
        )
        return {p: list(r) for p, r in plan["cases"].items()}

    def _lead(self, own: dict, deadline: float, others: list[int]) -> dict:
        votes = [own]
        for index in others:
            ref, why = self.store.wait(self._key(f"vote/{index}"), deadline,
                                       self._alive([index]))  # fmt: skip
            text = None if ref is None else get_blob(self.store, self.prefix, ref,
                                                     deadline)  # fmt: skip
            if text is None:
                return {"fallback": f"process {index} did not vote within "
                        f"{self.limit:g} s ({why or 'unreadable'})"}  # fmt: skip
            vote = json.loads(text)
            for field in ("cases", "candidates"):
                if vote[field] != own[field]:
                    return {"fallback": f"process {index}'s {field} differ from "
                            f"process 0's: every process must call tune() with the "
                            f"same cases and backends"}  # fmt: skip
            votes.append(vote)
        hosts = _sharing(votes)
        count, turn, cases = self.store.count, 0, {}
        for platform, items in own["cases"].items():
            cases[platform] = [(turn + i) % count for i in range(len(items))]
            turn += len(items)
        return {"cases": cases, "hosts": hosts}

    # -- 2. taking turns --------------------------------------------------------------
    @contextlib.contextmanager
    def turn(self, platform: str) -> Iterator[None]:
        """Time only when no other process of this host times: after every process
        of the host has made its first calls and the one before has timed."""
        self._outcome()
        mates = self.hosts.get(self.group, [self.index])
        self.store.put(self._key(f"{platform}/ready/{self.index}"), "1")
        deadline = self.started + self.budget_s + self.limit
        place = mates.index(self.index)
        waits = [f"{platform}/ready/{m}" for m in mates if m != self.index]
        waits += [f"{platform}/timed/{m}" for m in mates[:place]]
        for name in waits:
            peer = int(name.rsplit("/", 1)[1])
            got, why = self.store.wait(self._key(name), deadline, self._alive([peer]))
            if got is None:
                self._outcome()
                raise self._fail(f"process {self.index} waited for process {peer}'s "
                                 f"turn on {self.group}: {why}")  # fmt: skip
        try:
            yield
        finally:
            self.store.put(self._key(f"{platform}/timed/{self.index}"), "1")

    # -- 3. exchange ------------------------------------------------------------------
    def exchange(self, result: dict[str, Any]) -> list[dict[str, Any]]:
        """Every process's ``result``, in process order, once all came and the
        job's outcome is ``complete``.

        Raises:
            Fallback: a process's result did not come (it stopped, or the budget
                and the timeout passed), or the job fell back.
        """
        key = self._key(f"result/{self.index}")
        self.store.put(key, put_blob(self.store, self.prefix, _canonical(result)))
        deadline = self.started + self.budget_s + self.limit
        results: list[dict[str, Any]] = []
        for index in range(self.store.count):
            if index == self.index:
                results.append(result)
                continue
            ref, why = self.store.wait(self._key(f"result/{index}"), deadline,
                                       self._alive([index]))  # fmt: skip
            text = (
                None
                if ref is None
                else get_blob(
                    self.store, self.prefix, ref, time.monotonic() + self.limit
                )
            )
            if text is None:
                self._outcome()
                raise self._fail(f"process {index}'s results did not come: "
                                 f"{why or 'unreadable'}")  # fmt: skip
            results.append(json.loads(text))
        held = self.store.claim(self._key("outcome"), _canonical({"complete": True}))
        if "fallback" in json.loads(held):
            raise Fallback(json.loads(held)["fallback"])
        return results


def _sharing(votes: Sequence[dict[str, Any]]) -> dict[str, list[int]]:
    """Groups of processes that take turns: on one host, those whose cores
    overlap (directly or through another), each group in process order."""
    groups: list[tuple[str, set[int], list[int]]] = []
    for vote in sorted(votes, key=lambda v: v["process"]):
        cores = set(vote.get("cores") or [])
        joined = [g for g in groups if g[0] == vote["host"] and g[1] & cores]
        merged = (vote["host"], cores, [vote["process"]])
        for group in joined:
            groups.remove(group)
            merged = (group[0], group[1] | merged[1], group[2] + merged[2])
        groups.append((merged[0], merged[1], sorted(merged[2])))
    return {f"{host} #{i}": members for i, (host, _, members) in enumerate(groups)}


def _case(config: Any) -> list[Any]:
    """What a vote says of one case: its label and its operands' shapes/dtypes."""
    shapes = [
        [list(np.shape(a)), str(getattr(a, "dtype", type(a).__name__))]
        for a in getattr(config, "args", ())
    ]
    return [config.label, shapes]


_rounds: dict[str, int] = {}
_rounds_lock = threading.Lock()


def _next_round(primitive: str) -> int:
    """The number of this ``tune()`` of ``primitive`` in this process (the same on
    every process: tune is called by all, in the same order)."""
    with _rounds_lock:
        _rounds[primitive] = _rounds.get(primitive, 0) + 1
        return _rounds[primitive]


def warn_fallback(primitive: str, why: str) -> None:
    warnings.warn(
        f"polykernel: tuning '{primitive}' across this jax.distributed job fell "
        f"back: {why}. No process saved anything; every process keeps deciding "
        f"from the job's current table (or the untuned defaults). Fix the cause "
        f"and tune again.",
        JobFallbackWarning,
        stacklevel=4,
    )
