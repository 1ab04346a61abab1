"""The timing loop: first call (compile) apart, warm-up, then timed intervals.

The clock and the blocking function are parameters so the statistics can be tested
with a scripted fake clock; by default they are ``time.perf_counter`` and
``jax.block_until_ready``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import BenchmarkTypeError, BenchmarkValueError

__all__ = ["FunctionTiming", "Timing", "benchmark_function", "time_function"]

Clock = Callable[[], float]


@dataclass
class Timing:
    """Raw result of :func:`time_function` (seconds)."""

    compile_s: float
    times_s: list[float] = field(default_factory=list)
    output: Any = None


def check_counts(n_warmup: int, n_runs: int, n_batch_per_run: int) -> None:
    for name, value, low in (
        ("n_warmup", n_warmup, 0),
        ("n_runs", n_runs, 1),
        ("n_batch_per_run", n_batch_per_run, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise BenchmarkValueError(
                f"benchmark: {name} must be an integer >= {low}, got {value!r}."
            )


def _default_block(x: Any) -> Any:
    import jax

    return jax.block_until_ready(x)


def time_function(
    fn: Callable[..., Any],
    args: Sequence[Any] = (),
    *,
    n_warmup: int = 5,
    n_runs: int = 20,
    n_batch_per_run: int = 1,
    clock: Clock = time.perf_counter,
    block: Callable[[Any], Any] | None = None,
) -> Timing:
    """Time ``fn(*args)``: compile call, ``n_warmup`` calls, ``n_runs`` intervals.

    Each timed interval issues ``n_batch_per_run`` calls back to back and blocks
    once on all their outputs, which amortises the blocking cost on asynchronous
    devices; the recorded time is the interval divided by ``n_batch_per_run``.

    Args:
        fn: The function to time (usually a ``jax.jit`` wrapper).
        args: Positional arguments for every call.
        n_warmup: Untimed calls after the first one.
        n_runs: Number of timed intervals (one per-call time each).
        n_batch_per_run: Calls per timed interval.
        clock: Returns the current time in seconds.
        block: Waits for an output to be ready (``jax.block_until_ready``).

    Returns:
        A :class:`Timing` with the first-call time, per-call times and the first
        call's output.

    Raises:
        ValueError: a count is out of range.

    Example:
        >>> from polykernel.benchmark.timing import time_function
        >>> ticks = iter([0.0, 2.0, 10.0, 10.5, 20.0, 21.0])
        >>> clock = lambda: next(ticks)
        >>> t = time_function(lambda: 1, n_warmup=0, n_runs=2, clock=clock)
        >>> t.compile_s, t.times_s
        (2.0, [0.5, 1.0])
    """
    check_counts(n_warmup, n_runs, n_batch_per_run)
    block = _default_block if block is None else block
    start = clock()
    output = block(fn(*args))
    compile_s = clock() - start
    for _ in range(n_warmup):
        block(fn(*args))
    times: list[float] = []
    for _ in range(n_runs):
        start = clock()
        outs = [fn(*args) for _ in range(n_batch_per_run)]
        block(outs)
        times.append((clock() - start) / n_batch_per_run)
    return Timing(compile_s=compile_s, times_s=times, output=output)


class FunctionTiming(NamedTuple):
    """What :func:`benchmark_function` returns; unpacks as the reference's 5-tuple."""

    mean: float
    std: float
    min: float
    max: float
    output: Any


def benchmark_function(
    fn: Callable[..., Any],
    n_warmup: int,
    n_runs: int,
    n_batch_per_run: int = 1,
    data: Sequence[Any] = (),
) -> FunctionTiming:
    """Reference timing helper: ``(mean, std, min, max, output)``, seconds per call.

    As in the reference, ``fn`` is compiled with ``jax.jit``; the first call
    (compilation) is not timed, then ``n_warmup`` untimed calls, then ``n_runs``
    intervals of ``n_batch_per_run`` back-to-back calls. ``std`` is the population
    standard deviation (NumPy's default, as the reference computes it). The result
    is a named tuple, so ``timing.mean`` works as well as tuple unpacking.

    Example:
        >>> from polykernel import benchmark_function
        >>> mean, std, lo, hi, out = benchmark_function(lambda: 3, 0, 2)
        >>> int(out)
        3
    """
    import jax

    if not callable(fn):
        raise BenchmarkTypeError(
            f"benchmark_function: fn must be callable (got {type(fn).__name__}: "
            f"{fn!r}); pass the function to time."
        )
    timing = time_function(
        jax.jit(fn),
        data,
        n_warmup=n_warmup,
        n_runs=n_runs,
        n_batch_per_run=n_batch_per_run,
    )
    t = timing.times_s
    return FunctionTiming(
        statistics.fmean(t), statistics.pstdev(t), min(t), max(t), timing.output
    )
