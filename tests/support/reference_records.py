"""What a benchmark record looks like in the reference (brainevent 0.3.0)."""

from __future__ import annotations

# The eleven fields of a reference record, in its order: a result file we write
# starts each record with them.
REFERENCE_RECORD_FIELDS = [
    "platform",
    "backend",
    "label",
    "mean_ms",
    "std_ms",
    "min_ms",
    "throughput",
    "success",
    "error",
    "kernel_kwargs",
    "data_kwargs",
]
