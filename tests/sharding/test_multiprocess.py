"""JAX's multi-controller runtime: 2 processes x 2 CPU devices on loopback.

Each process imports a library that loads a C++ kernel at import, joins with
``jax.distributed.initialize`` (gloo collectives) and runs, on a 4-device mesh
spanning both, that kernel split by rows, an exported program, a Numba primitive with
``def_batch_partitioning`` and the catalog's ``csrmv`` (``A @ v`` and ``A.T @ u``,
numba and cuda_raw), checking its own shards against NumPy
(``multiprocess_child.py``). Run twice: with a cache directory per process (the
exporter's cache shipped as a read-only tier), and with one cache directory shared
by every process (each kernel built once across all of them). One export serves
both: the shared cache starts as a copy of the exporter's.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest
import zygote
from subprocess_support import SUPPORT, last_json, run_python

CHILD = SUPPORT / "multiprocess_child.py"
PROCESSES = 2
#: The kernels the children build: csrmv's Numba gather and scatter, its C++ module.
NUMBA_CSRMV = ("gather", "scatter")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(run_env: dict, cache: Path, readonly: Path | None = None) -> dict:
    path = os.pathsep.join(filter(None, [str(CHILD.parent), run_env.get("PYTHONPATH")]))
    # JAX_PLATFORMS=cpu: CPU hosts, also where a GPU is.
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(cache), "PYTHONPATH": path,
           "JAX_PLATFORMS": "cpu"}  # fmt: skip
    env.pop("XLA_FLAGS", None)  # the children set their device count themselves
    env.pop("POLYKERNEL_CACHE_READONLY", None)
    if readonly is not None:
        env["POLYKERNEL_CACHE_READONLY"] = str(readonly)
    return env


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    """``(the exporter's cache, the artefact)``: ``row_affine`` exported over 4
    devices, once for the module (neither test writes that cache: the first only
    reads it, as a tier, the second runs on a copy)."""
    folder = tmp_path_factory.mktemp("exporter")
    cache, artefact = folder / "cache", folder / "row_affine.jaxexport"
    env = _env(dict(os.environ), cache)
    out = run_python(CHILD, "export", artefact, env=env, timeout=120)
    assert last_json(out) == {"devices": 4}
    return cache, artefact


def _run(envs: list[dict], artefact: Path) -> list[dict]:
    """Start the processes together; their reports, in process order."""
    port = str(_free_port())
    # Forked by the zygote, which started no JAX backend: each initialises the
    # job and its devices as a fresh process does, without the imports.
    procs = [
        zygote.start([CHILD, "run", str(i), str(PROCESSES), port, artefact],
                     env=env, kind="full")
        for i, env in enumerate(envs)
    ]  # fmt: skip
    reports = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == 0, err[-3000:]
        report = last_json(out)
        assert report["ok"], (report, err[-3000:])
        reports.append(report)
    return reports


def _count(reports: list[dict], origin_is: str) -> dict[str, int]:
    """Per Numba kernel label: how many processes had it with ``origin_is``."""
    counts: dict[str, int] = {}
    for r in reports:
        for label, origin in r["numba"].items():
            counts[label] = counts.get(label, 0) + (origin == origin_is)
    return counts


def _listing(root: Path) -> list[tuple[str, int, int]]:
    return sorted(
        (str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns)
        for p in root.rglob("*")
    )


def _check_results(reports: list[dict]) -> None:
    for r in reports:
        assert set(r["checks"]) == {
            "library_cpp", "exported", "row_affine", "csrmv_numba", "csrmv_T_numba",
            "csrmv_cuda_raw", "csrmv_T_cuda_raw",
        }  # fmt: skip
        assert all(err <= 1e-4 for err in r["checks"].values()), r["checks"]


@pytest.mark.slow
def test_a_cache_per_process_with_the_exporters_cache_as_a_read_only_tier(
    tmp_path, run_env, exported
):
    shipped, artefact = exported
    envs = [_env(run_env, tmp_path / f"cache{i}", shipped) for i in range(PROCESSES)]
    before = _listing(shipped)
    reports = _run(envs, artefact)
    _check_results(reports)
    # Every process built its own csrmv kernels; row_affine came from the tier.
    built = _count(reports, "built")
    for part in NUMBA_CSRMV:
        (label,) = [k for k in built if part in k]
        assert built[label] == PROCESSES, built
    (affine,) = [k for k in built if "row_affine" in k]
    assert built[affine] == 0 and _count(reports, "disk")[affine] == PROCESSES
    assert [sum(r["native"].values()) for r in reports] == [2] * PROCESSES
    assert _listing(shipped) == before  # a read-only tier is never written


@pytest.mark.slow
def test_one_shared_cache_builds_each_kernel_once_across_the_processes(
    tmp_path, run_env, exported
):
    exporters, artefact = exported
    shared = tmp_path / "shared"
    shutil.copytree(exporters, shared)  # where the exporter built row_affine
    reports = _run([_env(run_env, shared)] * PROCESSES, artefact)
    _check_results(reports)
    built, hits = _count(reports, "built"), _count(reports, "disk")
    for label in built:  # row_affine was built by the exporter, csrmv's by one child
        first = 0 if "row_affine" in label else 1
        assert (built[label], hits[label]) == (first, PROCESSES - first), (built, hits)
    # Each C++ module (csrmv's, the library's) was built by exactly one process.
    modules = {name for r in reports for name in r["native"]}
    assert len(modules) == 2, modules
    for name in modules:
        built_by = [r["native"][name] for r in reports]
        assert sorted(built_by) == [False] * (PROCESSES - 1) + [True], (name, built_by)
