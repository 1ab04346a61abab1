"""The typed records of a tuned table: keys, choices, measurements, entries.

Every table — the user's ``tuned.json``, a library's shipped one, the legacy saved
defaults — is parsed into these records once, when it is read, and checked field by
field: nothing but these records reaches the decision, so a damaged table can cost
its entries but never a call. :meth:`Entry.from_json` raises ``ValueError`` (with
what was wrong) for an entry it cannot trust; the reader skips it.

An entry is one measured case (``Scope.TUNED``: a key with a shape bucket) or one
saved default (``Scope.SAVED``: ``polykernel benchmark --save-defaults``, any shape
and signature). It records the *identity* of every kernel it measured
(:mod:`.identity`): an entry whose kernels changed since is stale, reported and
never used.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import math
from collections.abc import Iterable, Mapping
from typing import Any

from . import values
from .ranking import in_the_race

__all__ = ["STATUSES", "Choice", "Entry", "Key", "Measurement", "Scope"]

#: What became of a candidate in a tuning run: timed; refused because its outputs
#: (or inputs) differ from the reference's; failed to build or run; abandoned past
#: its deadline; not tried (the budget cut it; reported, never written).
STATUSES = ("ok", "mismatch", "error", "timeout", "cut")
#: Any shape and signature: the key of a saved default.
ANY = "*"


class Scope(enum.StrEnum):
    """What an entry answers: one tuned case, or a saved default for any shape."""

    TUNED = "tuned"
    SAVED = "saved_default"


@dataclasses.dataclass(frozen=True)
class Key:
    """What an entry is looked up by.

    Attributes:
        primitive: the primitive's name.
        platform: ``cpu`` / ``gpu`` / ``tpu``.
        device: the device kind (CPU model and core count, GPU name); ``*`` any.
        family: the wider class (CPU instruction set, GPU compute capability).
        signature: input dtypes and ranks and the categorical static keywords, as
            one canonical string (``*``: any).
        bucket: the shape bucket (per dimension ``ceil(log2(size))``, unless the
            primitive buckets its own way); None: any shape.
    """

    primitive: str
    platform: str
    device: str
    family: str
    signature: str
    bucket: tuple[int, ...] | None

    def identity(self) -> tuple[Any, ...]:
        """What makes two entries the same case (a later one replaces the other)."""
        return (self.platform, self.device, self.signature, self.bucket)


@dataclasses.dataclass(frozen=True)
class Choice:
    """One backend with one value of each of its launch parameters."""

    backend: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(
        cls, backend: str, params: Mapping[str, Any] | Iterable[tuple[str, Any]] = ()
    ) -> Choice:
        items = params.items() if isinstance(params, Mapping) else params
        return cls(backend, tuple(sorted((str(k), v) for k, v in items)))

    @property
    def label(self) -> str:
        """``backend`` or ``backend(BLOCK=256, num_warps=4)``."""
        if not self.params:
            return self.backend
        inner = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{self.backend}({inner})"

    def token(self) -> str:
        """The exact identity of the choice (``1`` and ``True`` differ)."""
        inner = ",".join(f"{k}={values.token(v)}" for k, v in self.params)
        return f"{self.backend}({inner})"

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "params": {k: values.encode(v) for k, v in self.params},
        }

    @classmethod
    def from_json(cls, raw: Any) -> Choice:
        raw = _object(raw, "a choice")
        backend = _string(raw.get("backend"), "backend")
        params = raw.get("params", {})
        if not isinstance(params, dict):
            raise ValueError(f"params must be an object, got {type(params).__name__}")
        decoded = {}
        for name, value in params.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"parameter name {name!r} is not an identifier")
            decoded[name] = values.decode(value)
        return cls.of(backend, decoded)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One candidate of one case as measured: its status, per-call median and
    spread (IQR / median), its time relative to the case's fastest (round by round,
    over the passes) with that ratio's spread, the half-width of its interval
    (``ratio_error``, what :mod:`.ranking` compares by) and the rounds behind it,
    the same ratio with the machine's other cores busy (when measured), or why it
    was not timed; ``raced``: False for a candidate dropped from a pass's race (its
    ratio then rests on that pass's first rounds only: it never wins, nor is it
    its backend's best, while a raced one is there)."""

    choice: Choice
    status: str
    median_s: float | None = None
    spread: float | None = None
    ratio: float | None = None
    ratio_spread: float | None = None
    ratio_error: float | None = None
    rounds: int = 0
    loaded_ratio: float | None = None
    detail: str = ""
    raced: bool = True

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.ratio is not None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.choice.to_json(),
            "status": self.status,
            "median_s": self.median_s,
            "spread": self.spread,
            "ratio": self.ratio,
            "ratio_spread": self.ratio_spread,
            "ratio_error": self.ratio_error,
            "rounds": self.rounds,
            "loaded_ratio": self.loaded_ratio,
            "detail": self.detail,
            "raced": self.raced,
        }

    @classmethod
    def from_json(cls, raw: Any) -> Measurement:
        raw = _object(raw, "a candidate")
        status = raw.get("status")
        if status not in STATUSES or status == "cut":
            raise ValueError(f"status {status!r} is not one of {STATUSES[:-1]}")
        numbers = {
            f: _number(raw.get(f), f)
            for f in (
                "median_s",
                "spread",
                "ratio",
                "ratio_spread",
                "ratio_error",
                "loaded_ratio",
            )
        }
        if status == "ok" and numbers["ratio"] is None:
            raise ValueError("a timed candidate needs its ratio")
        rounds = raw.get("rounds", 0)
        if type(rounds) is not int or rounds < 0:
            raise ValueError(f"rounds must be an int >= 0, got {rounds!r}")
        detail = raw.get("detail", "")
        if not isinstance(detail, str):
            raise ValueError("detail must be a string")
        raced = raw.get("raced", True)  # absent in tables written before it was kept
        if type(raced) is not bool:
            raise ValueError(f"raced must be true or false, got {raced!r}")
        return cls(Choice.from_json(raw), status, rounds=rounds, detail=detail[:500],
                   raced=raced, **numbers)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Entry:
    """One measured case, or one saved default.

    Attributes:
        key: what it is looked up by.
        scope: :class:`Scope`.
        winner: the choice calls get.
        default: the untuned default when it was measured (the winner unless a
            candidate was faster beyond the measured spread).
        kernels: ``((backend, identity), ...)`` of every kernel it measured; None
            for an entry that did not record them (a legacy saved default).
        measured: every candidate as measured.
        recorded: the shape measured, the machine, the versions and the date.
        source: the file it was read from.
    """

    key: Key
    scope: Scope
    winner: Choice
    default: Choice | None = None
    kernels: tuple[tuple[str, str], ...] | None = ()
    measured: tuple[Measurement, ...] = ()
    recorded: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    source: str = ""

    def best_of(self, backend: str) -> Choice | None:
        """The fastest choice of ``backend`` this entry measured correct, among
        those in the race (:func:`.ranking.in_the_race`, as for the winner)."""
        ok = [m for m in self.measured if m.ok and m.choice.backend == backend]
        if ok:
            return min(in_the_race(ok), key=lambda m: m.ratio or 0.0).choice
        return self.winner if self.winner.backend == backend else None

    def ratios(self) -> dict[str, tuple[float, Choice]]:
        """``choice token -> (time relative to the fastest, choice)`` for every
        candidate measured correct."""
        return {m.choice.token(): (float(m.ratio or 1.0), m.choice)
                for m in self.measured if m.ok}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        k = self.key
        return {
            "platform": k.platform,
            "device": k.device,
            "family": k.family,
            "signature": k.signature,
            "bucket": None if k.bucket is None else list(k.bucket),
            "scope": self.scope.value,
            "winner": self.winner.to_json(),
            "default": None if self.default is None else self.default.to_json(),
            "kernels": None if self.kernels is None else dict(self.kernels),
            "candidates": [m.to_json() for m in self.measured],
            "recorded": dict(self.recorded),
        }

    @classmethod
    def from_json(cls, primitive: str, raw: Any, source: str) -> Entry:
        raw = _object(raw, "an entry")
        platform, device, family, signature = (
            _string(raw.get(f), f)
            for f in ("platform", "device", "family", "signature")
        )
        scope = raw.get("scope", Scope.TUNED.value)
        if scope not in {s.value for s in Scope}:
            raise ValueError(
                f"scope {scope!r} is not one of {[s.value for s in Scope]}"
            )
        bucket = raw.get("bucket")
        if scope == Scope.SAVED:
            bucket = None
        elif not isinstance(bucket, list) or not all(type(b) is int for b in bucket):
            raise ValueError("bucket must be a list of ints")
        key = Key(primitive, platform, device, family, signature,
                  None if bucket is None else tuple(bucket))  # fmt: skip
        recorded = raw.get("recorded", {})
        recorded = recorded if isinstance(recorded, dict) else {}
        if "winner" not in raw and "best" in raw:
            return cls._version_1(key, raw, recorded, source)
        winner = Choice.from_json(raw.get("winner"))
        default = raw.get("default")
        # No kernels (an entry written without them): unknown, hence stale.
        kernels = raw.get("kernels") or {}
        if not isinstance(kernels, dict) or not all(
            isinstance(b, str) and isinstance(d, str) for b, d in kernels.items()
        ):
            raise ValueError("kernels must map backend names to identities")
        measured = raw.get("candidates", [])
        if not isinstance(measured, list):
            raise ValueError("candidates must be a list")
        return cls(
            key,
            Scope(scope),
            winner,
            None if default is None else Choice.from_json(default),
            tuple(sorted(kernels.items())),
            tuple(Measurement.from_json(m) for m in measured),
            recorded,
            source,
        )

    @classmethod
    def _version_1(
        cls, key: Key, raw: dict[str, Any], recorded: dict[str, Any], source: str
    ) -> Entry:
        """A version-1 entry: its winner is ``best``, it recorded no kernels (so it
        is stale: reported, never used) and wrote tuples as lists; its candidates
        are kept where they still read ("cut" ones were written then)."""
        measured = []
        for item in _list(raw.get("candidates")):
            with contextlib.suppress(ValueError, TypeError):
                measured.append(Measurement.from_json(_tuples(item)))
        return cls(key, Scope.TUNED, Choice.from_json(_tuples(raw["best"])),
                   kernels=(), measured=tuple(measured), recorded=recorded,
                   source=source)  # fmt: skip


def _list(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else []


def _tuples(raw: Any, depth: int = 0) -> Any:
    """A version-1 choice with its parameter values' lists read as the tuples they
    were declared as."""
    if depth > values.MAX_DEPTH:
        raise ValueError(f"a value nested deeper than {values.MAX_DEPTH}")
    if isinstance(raw, list):
        return values.encode(tuple(_tuples(v, depth + 1) for v in raw))
    if depth == 0 and isinstance(raw, dict) and isinstance(raw.get("params"), dict):
        params = {k: _tuples(v, 1) for k, v in raw["params"].items()}
        return {**raw, "params": params}
    return raw


def _object(raw: Any, what: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object, got {type(raw).__name__}")
    return raw


def _string(raw: Any, field: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"{field} must be a non-empty string, got {raw!r:.40}")
    return raw


def _number(raw: Any, field: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"{field} must be a number, got {type(raw).__name__}")
    if not math.isfinite(raw) or raw < 0:
        raise ValueError(f"{field} must be finite and >= 0, got {raw!r}")
    return float(raw)
