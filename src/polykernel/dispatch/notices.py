"""What follows from a lowering's decision: misses counted, warnings given once.

:func:`~.decide.decide` is pure; the core passes each lowering's decision here:

- a decision that fell to the registered default while there was something to
  choose (several backends, or launch parameters) is a *miss*, counted per key
  (:func:`misses`; ``polykernel tune --report`` prints them) and, when asked
  (``polykernel.config.set_tuning_miss_warnings``), warned about once per key;
- a ``set_backend`` choice the primitive did not register is warned about once
  per (primitive, platform, backend) with a
  :class:`~polykernel.errors.BackendPreferenceWarning`.
"""

from __future__ import annotations

import threading
import warnings

from ..errors import BackendPreferenceWarning, TuningWarning
from ..settings.preferences import get_tuning_miss_warnings
from .decide import Dispatch
from .lookup import Registered
from .precedence import Reason
from .records import Key

__all__ = ["misses", "notice"]

_lock = threading.Lock()
_misses: dict[Key, int] = {}
_warned: set[tuple[str, str, str]] = set()


def misses() -> dict[Key, int]:
    """How many lowerings of each key found no tuned entry in this process."""
    with _lock:
        return dict(_misses)


def notice(decision: Dispatch, registered: Registered) -> None:
    """Count the decision's miss and give its warnings (each once)."""
    if decision.ignored_preference is not None:
        _preference_ignored(decision, registered)
    if decision.reason != Reason.DEFAULT:
        return
    informed = len(registered.kernels) > 1 or any(registered.kernels.values())
    if not informed:  # one backend, nothing to tune: not a miss
        return
    key = decision.key
    with _lock:
        first = key not in _misses
        _misses[key] = _misses.get(key, 0) + 1
    if first and get_tuning_miss_warnings():
        bucket = list(key.bucket) if key.bucket is not None else "any"
        warnings.warn(
            f"polykernel: no tuned entry for '{key.primitive}' on {key.platform} "
            f"({key.device}, bucket {bucket}, {key.signature}); using the "
            f"default backend. Tune it with `polykernel tune MODULE:NAME` or "
            f"op.tune() (warned once per key).",
            TuningWarning,
            stacklevel=4,
        )


def _preference_ignored(decision: Dispatch, registered: Registered) -> None:
    preferred = decision.ignored_preference or ""
    mark = (registered.primitive, registered.platform, preferred)
    with _lock:
        if mark in _warned:
            return
        _warned.add(mark)
    warnings.warn(
        f"polykernel.set_backend('{registered.platform}', '{preferred}') does not "
        f"apply to XLACustomKernel '{registered.primitive}': it registered "
        f"{list(registered.kernels)} for '{registered.platform}'. Using "
        f"'{decision.backend}' instead ({decision.reason.value}; warned once).",
        BackendPreferenceWarning,
        stacklevel=4,
    )
