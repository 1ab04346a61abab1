"""A candidate's first call: built, compiled and run once, on fresh copies of the
operands, in a worker with a deadline, its inputs checked afterwards.

This is where user code first runs during tuning, so whatever it does is caught
here: a build or run failure is recorded as ``error``; a first call that does not
return within its share of the budget is abandoned (``timeout``,
:mod:`.deadline`); a candidate that writes into its inputs is noted
(``Outcome.changed``: the runner makes it a ``mismatch``). The caller's arrays are
never handed to a candidate: every call gets copies in new device buffers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .candidates import Candidate
from .capture import BoundCall
from .deadline import DeadlineExceeded, call_with_deadline
from .report import Measured

__all__ = ["Outcome", "binder", "first_call", "fresh"]


@dataclasses.dataclass
class Outcome:
    """A candidate's first call: its jitted bind and outputs, the inputs it
    changed, or what went wrong."""

    fn: Callable[..., Any] | None = None
    outputs: list[np.ndarray] | None = None
    changed: tuple[int, ...] = ()
    failure: Measured | None = None

    @property
    def clean(self) -> bool:
        """Ran, and left its inputs as they were."""
        return self.failure is None and not self.changed


def fresh(operands: Sequence[Any], device: Any) -> list[Any]:
    """Copies of ``operands`` in new device buffers (host round trip: no aliasing)."""
    import jax

    return [jax.device_put(np.array(x), device) for x in operands]


def binder(
    primitive: Any, bound: BoundCall, candidate: Candidate
) -> Callable[..., Any]:
    """``bound``'s bind of ``primitive`` with ``candidate``'s backend and launch
    parameters, under its own ``jax.jit``."""
    import jax

    params = {**bound.statics, **dict(candidate.params)}
    outs = bound.params["outs"]
    return jax.jit(
        lambda *xs: primitive.bind(*xs, outs=outs, backend=candidate.backend, **params)
    )


def _detail(err: BaseException) -> str:
    text = str(err).strip()
    first_line = text.splitlines()[0] if text else ""
    return f"{type(err).__name__}: {first_line}"[:300]


def first_call(
    primitive: Any,
    bound: BoundCall,
    candidate: Candidate,
    host: Sequence[np.ndarray],
    device: Any,
    seconds: float,
) -> Outcome:
    """Run ``candidate`` once on fresh copies of ``bound``'s operands, waiting at
    most ``seconds``; ``host`` holds the operands as they must stay."""
    import jax

    fn, args = binder(primitive, bound, candidate), fresh(bound.operands, device)

    def run() -> list[np.ndarray]:
        return [np.asarray(o) for o in jax.block_until_ready(fn(*args))]

    try:
        outputs = call_with_deadline(run, seconds)
    except DeadlineExceeded as err:
        return Outcome(failure=Measured(candidate, "timeout", detail=str(err)))
    except Exception as err:  # recorded and skipped: a build or run failure
        return Outcome(failure=Measured(candidate, "error", detail=_detail(err)))
    changed = tuple(
        i for i, (a, h) in enumerate(zip(args, host, strict=True))
        if np.asarray(a).tobytes() != h.tobytes()
    )  # fmt: skip
    return Outcome(fn, outputs, changed)
