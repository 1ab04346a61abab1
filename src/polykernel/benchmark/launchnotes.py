"""The lines under a table that say which launch parameters each backend ran with.

A column headed ``numba`` may hold two kernels (serial for a small case, a thread
per core for a large one, as a tuned table decides per shape), so the table says,
per backend, the parameters of each case and why they were chosen
(:data:`~.launch.SOURCES`): the same words for the demo, ``polykernel benchmark``
and ``BenchmarkResult.table()``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from .launch import describe
from .record import BenchmarkRecord

__all__ = ["LAUNCH_TITLE", "launch_lines"]

LAUNCH_TITLE = (
    "launch parameters (tuned: a tuned table's entry; default: the first "
    "candidate; given: by the call):"
)


def _per_backend(records: Sequence[BenchmarkRecord], many: bool) -> dict[str, list]:
    """``{backend heading: [(description, [labels])]}`` in the records' order."""
    found: dict[str, dict[str, list[str]]] = {}
    for r in records:
        text = describe(r.launch_params, r.launch_source) if r.success else ""
        if not text:
            continue
        head = f"{r.backend} [{r.primitive} {r.platform}]" if many else r.backend
        found.setdefault(head, {}).setdefault(text, []).append(r.label)
    return {head: list(texts.items()) for head, texts in found.items()}


def launch_lines(
    records: Sequence[BenchmarkRecord], width: int | None, many: bool = False
) -> list[str]:
    """The title and one line (wrapped to ``width``) per backend that has launch
    parameters: ``numba: parallel=True (tuned)``, or per case where they differ;
    nothing when no record has any.

    Example:
        >>> from polykernel import BenchmarkRecord
        >>> from polykernel.benchmark.launchnotes import launch_lines
        >>> recs = [BenchmarkRecord("cpu", "numba", n, launch_params={"parallel": p},
        ...                         launch_source="tuned")
        ...         for n, p in (("n=1e3", False), ("n=1e6", True))]
        >>> print("\\n".join(launch_lines(recs, 100)[1:]))
          numba: parallel=False (tuned) for n=1e3; parallel=True (tuned) for n=1e6
    """
    groups = _per_backend(records, many)
    if not groups:
        return []
    lines = [LAUNCH_TITLE]
    wrap = textwrap.TextWrapper(
        width or 10**6,
        initial_indent="  ",
        subsequent_indent="    ",
        break_on_hyphens=False,
        break_long_words=False,
    )
    for head, texts in groups.items():
        if len(texts) == 1:
            what = texts[0][0]
        else:
            # " | " between labels: a config's label often holds commas itself.
            what = "; ".join(
                f"{text} for {' | '.join(labels)}" for text, labels in texts
            )
        lines += wrap.wrap(f"{head}: {what}")
    return lines
