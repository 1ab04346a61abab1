"""``BenchmarkRecord`` (one row: a config on a backend) and its statistics."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..errors import BenchmarkValueError

__all__ = [
    "NOISE_THRESHOLD",
    "STOP_REASONS",
    "BenchmarkRecord",
    "TimingStats",
    "compute_stats",
    "relative_iqr",
]

# torch.utils.benchmark's convention: a spread (IQR) above 10 % of the median means the
# measurement is not trustworthy at face value. A record measured with a spread bound
# (``run_benchmark(target_spread=...)``) is judged against its own bound instead.
NOISE_THRESHOLD = 0.10
# Why the timing of a case stopped (``BenchmarkRecord.stopped_by``), in words.
STOP_REASONS = {
    "runs": "the fixed number of runs",
    "spread": "its spread fell within the bound",
    "budget": "the case's time budget ran out",
    "max_runs": "the cap on runs was reached",
}


@dataclass(frozen=True)
class TimingStats:
    """Summary of per-call times, all in milliseconds."""

    median_ms: float
    p25_ms: float
    p75_ms: float
    mean_ms: float
    std_ms: float
    min_ms: float
    max_ms: float
    n: int

    @property
    def iqr_ms(self) -> float:
        return self.p75_ms - self.p25_ms

    @property
    def relative_iqr(self) -> float | None:
        """IQR divided by the median (the spread); ``None`` for a zero median."""
        return self.iqr_ms / self.median_ms if self.median_ms else None


def compute_stats(times_s: Sequence[float]) -> TimingStats:
    """Summarise per-call times given in seconds.

    Percentiles use linear interpolation (NumPy's default); ``std`` is the sample
    standard deviation (0 for a single time).

    Raises:
        ValueError: ``times_s`` is empty.

    Example:
        >>> from polykernel.benchmark.record import compute_stats
        >>> compute_stats([0.001, 0.002, 0.003]).median_ms
        2.0
    """
    if len(times_s) == 0:
        raise BenchmarkValueError(
            "compute_stats: no times to summarise (n_runs must be >= 1)."
        )
    ms = sorted(float(t) * 1e3 for t in times_s)

    def pct(q: float) -> float:
        pos = q * (len(ms) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(ms) - 1)
        return ms[lo] + (ms[hi] - ms[lo]) * (pos - lo)

    return TimingStats(
        median_ms=pct(0.5),
        p25_ms=pct(0.25),
        p75_ms=pct(0.75),
        mean_ms=statistics.fmean(ms),
        std_ms=statistics.stdev(ms) if len(ms) > 1 else 0.0,
        min_ms=ms[0],
        max_ms=ms[-1],
        n=len(ms),
    )


def runs_note(
    n: int, n_sampled: int, stopped_by: str | None, passes: int = 1, processes: int = 1
) -> str:
    """How many runs the statistics are from, and why timing stopped, in words.

    Example:
        >>> from polykernel.benchmark.record import runs_note
        >>> runs_note(15, 400, "budget")
        " over the steadiest 15 of 400 runs; the case's time budget ran out"
        >>> runs_note(15, 40, "spread", passes=3)
        ' over 15 of 40 runs in 3 passes; its spread fell within the bound'
        >>> runs_note(30, 80, None, passes=2, processes=2)
        ' over 30 of 80 runs in 2 passes and 2 processes'
    """
    text = ""
    apart = [f"{passes} passes"] * (passes > 1) + [f"{processes} processes"] * (
        processes > 1
    )
    if n and apart:  # a window of each pass: not one stretch of runs
        text = f" over {n} of {n_sampled} runs in {' and '.join(apart)}"
    elif n and n_sampled > n:
        text = f" over the steadiest {n} of {n_sampled} runs"
    elif n:
        text = f" over {n} run{'s' if n != 1 else ''}"
    if stopped_by in STOP_REASONS and stopped_by != "runs":
        text += f"; {STOP_REASONS[stopped_by]}"
    return text


def relative_iqr(times_s: Sequence[float]) -> float | None:
    """The spread of per-call times: interquartile range / median (``None`` if the
    median is 0 or there are no times). The statistic the adaptive runner bounds and
    ``BenchmarkRecord.noisy`` judges.

    Example:
        >>> from polykernel.benchmark.record import relative_iqr
        >>> round(relative_iqr([0.9, 1.0, 1.0, 1.1, 1.2]), 3)
        0.1
    """
    if len(times_s) == 0:
        return None
    ms = sorted(times_s)  # the same interpolation as compute_stats, nothing else

    def pct(q: float) -> float:
        pos = q * (len(ms) - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, len(ms) - 1)
        return ms[lo] + (ms[hi] - ms[lo]) * (pos - lo)

    median = pct(0.5)
    return (pct(0.75) - pct(0.25)) / median if median else None


@dataclass
class BenchmarkRecord:
    """One benchmark row: a config (``label``) run on one backend.

    The first eleven fields keep the names and order of the reference API, so a
    record built the reference way (``mean_ms``, ``std_ms``, ``min_ms`` only) works
    everywhere: queries rank by the median when every record has one, else by the
    mean, and tables print ``—`` for what a record does not know. Times are per call
    in milliseconds. A failed run has ``success=False``, its ``error`` and NaN for
    mean, std and min (as the reference records it); our other times stay ``None``.

    Attributes:
        throughput: ``work / median`` in ``throughput_unit`` (e.g. ``"B/s"``) when
            the config declared its work, else ``None``.
        compile_ms: Time of the first call (tracing + lowering + XLA compile).
        matches_reference: ``True``/``False`` after comparing outputs with the
            ``reference_backend``; ``None`` if not compared.
        max_abs_diff: Largest absolute output difference to the reference.
        spread_bound: The bound on the spread (IQR / median) the run aimed for
            (``run_benchmark(target_spread=...)``); ``None``: a fixed number of
            runs, judged against ``NOISE_THRESHOLD`` (10 %).
        stopped_by: Why timing stopped, a key of ``STOP_REASONS``: ``"runs"``
            (the fixed count), ``"spread"`` (within the bound), ``"budget"`` (the
            case's time budget ran out) or ``"max_runs"``; ``None`` if unknown.
        n_sampled: Timed runs in all; the statistics are those of ``n``
            consecutive ones (the last window, or the steadiest half when the
            bound was not reached; with passes, such a stretch of each pass);
            ``0`` if unknown.
        paired_base: The backend ``paired_ratio`` is relative to: the case's
            reference (``jax_raw`` where registered), timed in the same rounds.
        paired_ratio: This backend's time divided by ``paired_base``'s, from the
            fast ends of both (each one's fastest fifth of its calls, over every
            round both ran in; ``benchmark.paired.fast_end_ratio``): load and a
            change of the machine's speed during the run cancel in it; ``None``
            if not measured so.
        paired_spread: How far that ratio on the first and on the second half
            of the rounds differ, over the ratio.
        launch_params: The launch parameters the call was lowered with (what
            ``op.dispatch(..., backend=...)`` decided).
        launch_source: Why those: ``"tuned"`` (a tuned table's entry, yours or
            shipped), ``"given"`` (the call passed them), ``"default"`` (each
            parameter's first candidate); ``None``: no parameters, or unknown.
        passes: The passes the case was timed in, apart in time
            (``run_benchmarks(passes=...)``); 1 for one stretch of rounds.
        processes: The processes whose timings the record joins
            (``benchmark.processes.merge_processes``); 1 for one.

    Example:
        >>> from polykernel import BenchmarkRecord
        >>> r = BenchmarkRecord("cpu", "numba", "n=10", median_ms=1.0, p25_ms=0.9,
        ...                     p75_ms=1.2)
        >>> round(r.relative_iqr, 3), r.noisy
        (0.3, True)
    """

    platform: str
    backend: str
    label: str
    mean_ms: float | None = None
    std_ms: float | None = None
    min_ms: float | None = None
    throughput: float | None = None
    success: bool = True
    error: str | None = None
    kernel_kwargs: dict[str, Any] = field(default_factory=dict)
    data_kwargs: dict[str, Any] = field(default_factory=dict)
    primitive: str = ""
    median_ms: float | None = None
    p25_ms: float | None = None
    p75_ms: float | None = None
    max_ms: float | None = None
    n: int = 0
    n_batch_per_run: int = 1
    compile_ms: float | None = None
    throughput_unit: str | None = None
    reference_backend: str | None = None
    matches_reference: bool | None = None
    max_abs_diff: float | None = None
    spread_bound: float | None = None
    stopped_by: str | None = None
    n_sampled: int = 0
    paired_base: str | None = None
    paired_ratio: float | None = None
    paired_spread: float | None = None
    launch_params: dict[str, Any] = field(default_factory=dict)
    launch_source: str | None = None
    passes: int = 1
    processes: int = 1

    @classmethod
    def from_stats(cls, stats: TimingStats, **kw: Any) -> BenchmarkRecord:
        """Build a successful record from :class:`TimingStats` plus other fields."""
        return cls(
            mean_ms=stats.mean_ms,
            std_ms=stats.std_ms,
            min_ms=stats.min_ms,
            median_ms=stats.median_ms,
            p25_ms=stats.p25_ms,
            p75_ms=stats.p75_ms,
            max_ms=stats.max_ms,
            n=stats.n,
            **kw,
        )

    @property
    def iqr_ms(self) -> float | None:
        """Interquartile range of the per-call times (ms)."""
        if self.p25_ms is None or self.p75_ms is None:
            return None
        return self.p75_ms - self.p25_ms

    @property
    def relative_iqr(self) -> float | None:
        """IQR divided by the median; ``None`` when unknown."""
        iqr = self.iqr_ms
        if iqr is None or not self.median_ms:
            return None
        return iqr / self.median_ms

    @property
    def noise_bound(self) -> float:
        """The spread above which this record is noisy: its ``spread_bound``, else
        ``NOISE_THRESHOLD`` (10 %)."""
        bound = self.spread_bound
        if isinstance(bound, int | float) and not isinstance(bound, bool) and bound > 0:
            return float(bound)
        return NOISE_THRESHOLD

    @property
    def noisy(self) -> bool:
        """Whether the IQR exceeds the noise bound (10 % of the median unless the run
        set another): do not trust small gaps between such times."""
        rel = self.relative_iqr
        return rel is not None and rel > self.noise_bound

    @property
    def noise_note(self) -> str | None:
        """Why the record is noisy, in words, e.g. ``"IQR 23% of the median (bound
        5%) over the steadiest 15 of 400 runs; the case's time budget ran out"``;
        ``None`` if it is not noisy."""
        if not self.noisy:
            return None
        rel = self.relative_iqr or 0.0
        text = f"IQR {rel:.0%} of the median (bound {self.noise_bound:.0%})"
        return text + runs_note(
            self.n, self.n_sampled, self.stopped_by, self.passes, self.processes
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a plain dict: every dataclass field, then the derived
        ``relative_iqr`` and ``noisy`` (ignored when a file is read back)."""
        data = asdict(self)
        data["relative_iqr"] = self.relative_iqr
        data["noisy"] = self.noisy
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchmarkRecord:
        """Rebuild a record from :meth:`to_dict` output; unknown keys are ignored."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
