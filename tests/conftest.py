"""Test-session environment: CPU JAX, a thread-safe Numba layer, private caches.

The variables are set before JAX or Numba is imported by any test module, and every
cache directory lives under one temporary directory this run owns.
"""

from __future__ import annotations

import os
import shutil
import tempfile

_RUN_DIR = tempfile.mkdtemp(prefix="polykernel-tests-")
os.chmod(_RUN_DIR, 0o700)
os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["NUMBA_THREADING_LAYER"] = "omp"
os.environ["POLYKERNEL_CACHE_DIR"] = os.path.join(_RUN_DIR, "polykernel-cache")
os.environ["POLYKERNEL_CONFIG_DIR"] = os.path.join(_RUN_DIR, "polykernel-config")
os.environ["NUMBA_CACHE_DIR"] = os.path.join(_RUN_DIR, "numba-cache")
os.environ["WARP_CACHE_PATH"] = os.path.join(_RUN_DIR, "warp-cache")
os.environ["TRITON_CACHE_DIR"] = os.path.join(_RUN_DIR, "triton-cache")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import pytest  # noqa: E402


def pytest_report_header(config: pytest.Config) -> list[str]:
    import jax

    return [f"jax {jax.__version__}, run dir {_RUN_DIR}"]


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    # No test machine of ours has a GPU; GPU launch tests are skipped unless the
    # run is on a machine where JAX sees one (JAX_PLATFORMS must then allow it).
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (none on this machine)")
    if not _has_gpu():
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)


def _has_gpu() -> bool:
    return (
        shutil.which("nvidia-smi") is not None
        and os.environ.get("POLYKERNEL_TEST_GPU") == "1"
    )


@pytest.fixture
def run_env() -> dict[str, str]:
    """Environment for subprocesses: the same private caches and settings."""
    return dict(os.environ)
