"""``tune()``'s arguments, checked before anything is measured.

Every argument of ``XLACustomKernel.tune`` (and of ``polykernel tune``) is checked
here, so a wrong type or value is a :class:`~polykernel.errors.TuningTypeError` /
:class:`~polykernel.errors.TuningValueError` naming the argument, what it got and
what it takes — before the first candidate runs, never a raw error after minutes
of measurement, never a silent reading (``max_seconds=nan`` as "no budget",
``True`` as 1, ``backends="numba"`` as a set of letters).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

from ..errors import TuningTypeError, TuningValueError
from ..platforms import PLATFORMS

__all__ = [
    "TuneOptions",
    "check_backends",
    "check_configs",
    "check_options",
    "check_platforms",
]

#: The largest ``target_spread`` (IQR / median) a timing rule takes.
MAX_SPREAD = 10.0


@dataclasses.dataclass(frozen=True)
class TuneOptions:
    """How one tuning run goes (see ``XLACustomKernel.tune``)."""

    max_seconds: float = 120.0
    max_candidates: int | None = None
    n_warmup: int = 2
    n_runs: int = 10
    target_spread: float = 0.05
    case_seconds: float = 2.0
    passes: int = 2
    rtol: float | None = None
    atol: float | None = None
    verbose: bool = False
    contention: bool = False


def _where(owner: str) -> str:
    return f"XLACustomKernel '{owner}'.tune()"


def _positive(
    owner: str,
    name: str,
    value: Any,
    what: str = "number of seconds",
    below: float = math.inf,
) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TuningTypeError(
            f"{_where(owner)}: {name} must be a {what}, got "
            f"{type(value).__name__}: {value!r:.60}."
        )
    if not (math.isfinite(value) and 0 < value < below):
        bound = f" and < {below:g}" if math.isfinite(below) else ""
        raise TuningValueError(
            f"{_where(owner)}: {name} must be a finite {what} > 0{bound}, got "
            f"{value!r}."
        )
    return float(value)


def _count(owner: str, name: str, value: Any, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TuningTypeError(
            f"{_where(owner)}: {name} must be an int >= 1"
            f"{' or None' if optional else ''}, got {type(value).__name__}: "
            f"{value!r:.60}."
        )
    if value < 1:
        raise TuningValueError(f"{_where(owner)}: {name} must be >= 1, got {value}.")
    return int(value)


def _tolerance(owner: str, name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TuningTypeError(
            f"{_where(owner)}: {name} must be a number or None (the per-dtype "
            f"default), got {type(value).__name__}: {value!r:.60}."
        )
    if not math.isfinite(value) or value < 0:
        raise TuningValueError(
            f"{_where(owner)}: {name} must be finite and >= 0, got {value!r}."
        )
    return float(value)


def _flag(owner: str, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TuningTypeError(
            f"{_where(owner)}: {name} must be True or False, got "
            f"{type(value).__name__}: {value!r:.60}."
        )
    return value


def check_options(
    owner: str,
    *,
    max_seconds: Any,
    max_candidates: Any,
    target_spread: Any,
    case_seconds: Any,
    passes: Any,
    rtol: Any,
    atol: Any,
    verbose: Any,
    contention: Any,
) -> TuneOptions:
    """The checked options of one ``tune()`` call.

    Raises:
        TuningTypeError: an argument of the wrong type.
        TuningValueError: an argument out of range (NaN, infinite, negative, 0).
    """
    spread = _positive(
        owner, "target_spread", target_spread, "fraction (IQR / median)", MAX_SPREAD
    )
    return TuneOptions(
        max_seconds=_positive(owner, "max_seconds", max_seconds),
        max_candidates=_count(owner, "max_candidates", max_candidates, optional=True),
        target_spread=spread,
        case_seconds=_positive(owner, "case_seconds", case_seconds),
        passes=_count(owner, "passes", passes) or 1,
        rtol=_tolerance(owner, "rtol", rtol),
        atol=_tolerance(owner, "atol", atol),
        verbose=_flag(owner, "verbose", verbose),
        contention=_flag(owner, "contention", contention),
    )


def _names(
    owner: str, what: str, value: Any, names: Any, allowed: Sequence[str]
) -> list[str]:
    """``names`` (``value`` as given) as a list of ``allowed`` names, each once."""
    where = _where(owner)
    if not isinstance(names, list | tuple) or not all(
        isinstance(n, str) for n in names
    ):
        raise TuningTypeError(
            f"{where}: {what} must be a list of names from {list(allowed)}, or None, "
            f"got {type(value).__name__}: {value!r:.60}."
        )
    if not names:
        raise TuningValueError(
            f"{where}: {what} is an empty {type(names).__name__}; name at least one "
            f"of {list(allowed)}, or pass None for all."
        )
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise TuningValueError(
            f"{where}: {what} {unknown} not among {list(allowed)}; name some of "
            f"those, or pass None for all."
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise TuningValueError(
            f"{where}: {what} names {twice} more than once; name each once."
        )
    return list(names)


def check_platforms(owner: str, platform: Any) -> list[str] | None:
    """``platform`` as a list of platform names (None: every one present; a
    string: that one).

    Raises:
        TuningTypeError: not a string, a list or tuple of strings, or None.
        TuningValueError: an empty list, an unknown platform, or one named twice.
    """
    if platform is None:
        return None
    names = [platform] if isinstance(platform, str) else platform
    return _names(owner, "platform", platform, names, PLATFORMS)


def check_backends(
    owner: str, backends: Any, registered: Sequence[str]
) -> list[str] | None:
    """``backends`` as a list of registered backend names (None: all).

    Raises:
        TuningTypeError: a bare string, or anything but a list or tuple of strings.
        TuningValueError: an empty list, a name no platform registered, or a name
            given twice.
    """
    if backends is None:
        return None
    if isinstance(backends, str):
        raise TuningTypeError(
            f"{_where(owner)}: backends must be a list of backend names, e.g. "
            f"backends=[{backends!r}], got the string {backends!r}."
        )
    return _names(owner, "backends", backends, backends, registered)


def check_configs(owner: str, configs: Any, what: str = "configs") -> list[Any]:
    """``configs`` (or what the benchmark data function returned: ``what``) as a
    non-empty list of ``BenchmarkConfig``.

    Raises:
        TuningTypeError: not a list or tuple, or holding anything else.
        TuningValueError: an empty one.
    """
    from ..benchmark.config import BenchmarkConfig

    fix = "e.g. configs=[BenchmarkConfig('n=1000', (x,))]"
    if not isinstance(configs, list | tuple):
        raise TuningTypeError(
            f"{_where(owner)}: {what} must be a list of BenchmarkConfig, got "
            f"{type(configs).__name__}: {configs!r:.60}; {fix}."
        )
    bad = next((c for c in configs if not isinstance(c, BenchmarkConfig)), None)
    if bad is not None:
        raise TuningTypeError(
            f"{_where(owner)}: {what} must hold BenchmarkConfig objects only, got "
            f"{type(bad).__name__}: {bad!r:.60}; {fix}."
        )
    if not configs:
        raise TuningValueError(
            f"{_where(owner)}: {what} is empty: there is no case to tune; {fix}."
        )
    return list(configs)
