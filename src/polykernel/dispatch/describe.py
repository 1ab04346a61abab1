"""A decision in words: one short line for ``repr``, and the long form on request.

The :class:`~.decide.Dispatch` object holds the key, the table entry with every
candidate it measured, the stale entries: printed whole (the dataclass ``repr``) it
ran to some 2,000 characters. It prints as one line instead, and says where the rest
is: :meth:`Dispatch.details` (this module's :func:`details`), a few lines within
100 columns that name every launch parameter and where it came from, the key that
was looked up, the entry used and the entries passed over.
"""

from __future__ import annotations

import textwrap
from typing import Any

from .precedence import level_of

__all__ = ["WIDTH", "details", "param_sources", "short"]

WIDTH = 100


def _call(decision: Any) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in sorted(decision.params.items()))
    return f"{decision.backend}({params})" if params else decision.backend


def short(decision: Any) -> str:
    """``repr`` of a decision: what was picked and why, and where the long form is.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> from polykernel.dispatch.describe import short
        >>> print(short(NS(primitive="op", platform="cpu", backend="numba",
        ...                params={"parallel": True}, reason="exact")))
        <Dispatch op on cpu: numba(parallel=True) [exact]; .details()>
    """
    reason = getattr(decision.reason, "value", decision.reason)
    return (
        f"<Dispatch {decision.primitive} on {decision.platform}: "
        f"{_call(decision)} [{reason}]; .details()>"
    )


def param_sources(decision: Any) -> dict[str, str]:
    """Each launch parameter's source: ``"given"`` (the call passed it),
    ``"tuned"`` (the entry used measured it) or ``"default"`` (its first
    candidate)."""
    tuned: set[str] = set()
    if decision.entry is not None:
        best = decision.entry.best_of(decision.backend)
        tuned = {name for name, _ in best.params} if best is not None else set()
    return {
        name: "given"
        if name in decision.from_call
        else "tuned"
        if name in tuned
        else "default"
        for name in decision.params
    }


def _entry_lines(entry: Any) -> list[str]:
    if entry is None:
        return ["entry: none (nothing tuned or saved answered this key)"]
    bucket = entry.key.bucket
    shape = entry.recorded.get("shape", None if bucket is None else list(bucket))
    what = "any shape" if bucket is None else f"shape {shape}"
    when = entry.recorded.get("date")
    text = f"entry: measured on {entry.key.device}, {what}"
    text += f", {when}" if when else ""
    text += f"; from {entry.source}" if entry.source else ""
    ok = [m for m in entry.measured if getattr(m, "ok", False)]
    if ok:
        text += f"; {len(ok)} candidate{'s' if len(ok) != 1 else ''} measured correct"
    return [text]


def details(decision: Any, width: int = WIDTH) -> str:
    """The long form of a decision, in lines of at most ``width`` columns."""
    level = level_of(decision.reason)
    reason = getattr(decision.reason, "value", decision.reason)
    lines = [
        f"{decision.primitive} on {decision.platform}: {_call(decision)}",
        f"why: [{reason}] level {level.number} ({level.name}): {level.what}",
    ]
    sources = param_sources(decision)
    if sources:
        lines.append(
            "launch parameters: "
            + ", ".join(
                f"{k}={decision.params[k]!r} ({sources[k]})" for k in sorted(sources)
            )
        )
    key = decision.key
    bucket = "any" if key.bucket is None else list(key.bucket)
    lines.append(
        f"key: device {key.device}; family {key.family}; signature {key.signature}; "
        f"shape bucket {bucket}"
    )
    lines += _entry_lines(decision.entry)
    for entry, why in decision.stale:
        lines.append(f"stale entry (not used), from {entry.source or '?'}: {why}")
    if decision.ignored_preference is not None:
        lines.append(
            f"set_backend({decision.ignored_preference!r}) ignored: this primitive "
            "did not register that backend"
        )
    agreed = getattr(decision, "agreed", None)
    if agreed is not None:
        fallback = getattr(decision, "job_fallback", None)
        lines.append(f"job: from {agreed}" + (f" ({fallback})" if fallback else ""))
    wrap = textwrap.TextWrapper(
        width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False
    )
    return "\n".join(out for line in lines for out in wrap.wrap(line))
