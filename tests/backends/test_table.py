"""The backend table: the seven built-in technologies and their protocol objects."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import polykernel as pk
from polykernel import backends

BUILTIN = ["numba", "numba_cuda", "warp", "pallas", "triton", "cuda_raw", "jax_raw"]


def test_every_builtin_technology_is_a_backend_of_the_same_shape():
    assert backends.backend_names()[: len(BUILTIN)] == BUILTIN
    for name in BUILTIN:
        backend = backends.lookup(name)
        assert isinstance(backend, pk.Backend) and backend.name == name
        module = importlib.import_module(f"polykernel.backends.{name}.backend")
        assert module.BACKEND is backend  # one package per technology, one shape
        assert backend.platforms and all(p in ("cpu", "gpu", "tpu")
                                         for p in backend.platforms)  # fmt: skip
    assert backends.reference_backends() == ["jax_raw"]
    assert backends.lookup("no_such_backend") is None


@pytest.mark.parametrize("name", BUILTIN)
def test_each_backend_reports_its_rows_for_polykernel_info(name):
    rows = backends.lookup(name).info_rows(gpu=False)
    assert rows and all(r[0] == name and isinstance(r[2], bool) for r in rows)


def test_the_lowering_context_comes_from_the_backend_not_a_name_comparison():
    import contextlib

    pallas = backends.lookup("pallas").lowering_context("gpu")
    assert not isinstance(pallas, contextlib.nullcontext)
    assert isinstance(backends.lookup("numba").lowering_context("gpu"),
                      contextlib.nullcontext)  # fmt: skip


def test_looking_backends_up_imports_no_optional_package():
    probe = (
        "import sys, polykernel as pk\n"
        "pk.backends.all_backends(); pk.backends.install_revivers()\n"
        "print([m for m in ('numba', 'warp', 'triton', 'numba_cuda', 'llvmlite')"
        " if m in sys.modules])\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "[]"
