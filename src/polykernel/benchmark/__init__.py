"""Cross-backend benchmarks: configs in, statistics, tables, files and plots out.

``XLACustomKernel.benchmark(platform=...)`` is the usual entry point; it returns a
:class:`BenchmarkResult`. Nothing here imports matplotlib until a plot is drawn.

Imports point one way: ``result`` (the class) sits on top of ``table``/``layouts``
(text), ``io`` (files), ``plot``/``chart`` (figures) and ``ranking`` (winners), which
all take records and a name; ``runner`` builds results on top of them all.
"""

from .config import BenchmarkConfig
from .progress import Progress
from .record import BenchmarkRecord, TimingStats, compute_stats
from .result import BenchmarkResult, Mismatch
from .runner import BenchmarkPlan, plan_benchmark, run_benchmark, run_benchmarks
from .timing import FunctionTiming, benchmark_function, time_function

__all__ = [
    "BenchmarkConfig",
    "BenchmarkPlan",
    "BenchmarkRecord",
    "BenchmarkResult",
    "FunctionTiming",
    "Mismatch",
    "Progress",
    "TimingStats",
    "benchmark_function",
    "compute_stats",
    "plan_benchmark",
    "run_benchmark",
    "run_benchmarks",
    "time_function",
]
