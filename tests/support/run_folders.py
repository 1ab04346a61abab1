"""Folders a whole test run shares (tests/conftest.py): made by its first process,
the pytest-xdist controller under xdist, and inherited by every worker and child."""

from __future__ import annotations

import os


def assert_shared_by_the_run(path: str, name: str) -> None:
    """``path`` is the folder ``name`` in the first process's run directory: in a
    pytest-xdist worker, another run directory than the worker's own."""
    run_dir = os.path.dirname(path)
    assert os.path.basename(path) == name
    assert os.path.basename(run_dir).startswith("polykernel-tests-")
    own_run_dir = os.path.dirname(os.environ["TMPDIR"])
    worker = "PYTEST_XDIST_WORKER" in os.environ
    assert (run_dir != own_run_dir) == worker, (run_dir, own_run_dir)
