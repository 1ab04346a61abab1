"""The order the suite's files are handed to the workers in (issue 37, item 8)."""

from __future__ import annotations

#: The test files that keep a worker longest (over 11 s each in a `make test` on the
#: 2-core machine, 2026-11-30), longest first. They are collected first, so that
#: under `--dist loadfile` they start first and the shorter files fill in after
#: them: the workers then finish within seconds of each other, where in folder
#: order one of them ran the long sharding and tuning files alone at the end.
LONGEST_FIRST = (
    "tests/distributed/test_job_tuning.py",
    "tests/docs/test_docs_code.py",
    "tests/cli/test_benchmark_compare.py",
    "tests/docs/test_examples.py",
    "tests/cache/test_faults.py",
    "tests/backends/warp/test_linked.py",
    "tests/cli/test_demo.py",
    "tests/backends/numba/test_cache_identity.py",
    "tests/sharding/test_vmap.py",
    "tests/backends/numba/test_parallel_cache.py",
    "tests/benchmark/test_scripts.py",
    "tests/distributed/test_job_dispatch.py",
    "tests/docs/test_docstring_examples.py",
    "tests/sharding/test_multiprocess.py",
    "tests/tuning/test_tune_faults.py",
    "tests/core/test_backend_start.py",
    "tests/benchmark/test_widths.py",
    "tests/testing/test_check_kernel.py",
    "tests/core/test_export_xproc.py",
    "tests/contract/test_conformance.py",
)


def longest_first(items: list) -> None:
    """Sort collected ``items`` so the files of :data:`LONGEST_FIRST` come first, in
    its order (a stable sort: each file's tests, and every other file, keep theirs)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
