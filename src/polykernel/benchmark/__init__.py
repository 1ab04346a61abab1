"""Cross-backend benchmarks: configs in, statistics, tables, files and plots out.

``XLACustomKernel.benchmark(platform=...)`` is the usual entry point; it returns a
:class:`BenchmarkResult`. Nothing here imports matplotlib until a plot is drawn.
"""

from .config import BenchmarkConfig
from .progress import Progress
from .record import BenchmarkRecord, TimingStats, compute_stats
from .result import BenchmarkResult, Mismatch
from .runner import run_benchmark
from .timing import benchmark_function, time_function

__all__ = [
    "BenchmarkConfig",
    "BenchmarkRecord",
    "BenchmarkResult",
    "Mismatch",
    "Progress",
    "TimingStats",
    "benchmark_function",
    "compute_stats",
    "run_benchmark",
    "time_function",
]
