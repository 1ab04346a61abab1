"""Timing shared by the benchmark scripts (imported after they set the environment)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import jax


def time_all(fns: dict[str, Callable], args: tuple, reps: int, inner: int) -> dict:
    """Median seconds per call of each ``fn(*args)`` (blocking).

    The implementations are interleaved within each repetition, so slow drifts of
    the machine (allocator state, other load) hit all of them alike.
    """
    for fn in fns.values():
        jax.block_until_ready(fn(*args))
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                out = fn(*args)
            jax.block_until_ready(out)
            samples[name].append((time.perf_counter() - t0) / inner)
    return {name: statistics.median(v) for name, v in samples.items()}
