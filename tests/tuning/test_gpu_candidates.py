"""The GPU half of the catalog's tunables, lowered here: every candidate compiles.

The catalog declares launch parameters for its GPU kernels (Triton ``BLOCK`` and
``num_warps``, Numba-CUDA ``threads_per_block``, the Pallas block). Tuning on a GPU
binds each candidate as the tuner does (the primitive's own bind, the candidate's
parameters as keywords); here every one of them is lowered for CUDA on this CPU-only
machine (Triton and Numba-CUDA compile their kernels for sm_90 in the process), so a
value that cannot build is found before a GPU is lent. Each candidate must reach the
kernel: two candidates of one backend never lower to the same program.
"""

from __future__ import annotations

import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel import catalog
from polykernel.catalog._support import random_csr
from polykernel.tuning.candidates import enumerate_candidates
from polykernel.tuning.capture import bound_calls

#: Each GPU backend and the package it needs to lower here.
NEEDS = {
    "triton": "triton",
    "numba_cuda": "numba.cuda",
}


def _installed(backend: str) -> bool:
    if backend == "pallas":  # needs this JAX's Pallas Triton backend
        return pk._jax_compat.pallas_compiler_params_class("gpu") is not None
    module = NEEDS.get(backend)
    try:
        return module is not None and importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _cases():
    # Sizes above every candidate block: a small problem gets one small block
    # whatever the candidate (the generators clamp), and then nothing differs.
    x = jnp.linspace(-1, 1, 4096, dtype=jnp.float32)
    data, indices, indptr = random_csr(1024, 1024, 0.004, seed=1)
    v = np.linspace(1, 2, 1024, dtype=np.float32)
    yield "scaled_add", catalog.scaled_add_p, catalog.scaled_add, (x, x), {"alpha": 2.0}
    for t in (False, True):
        statics = {"shape": (1024, 1024), "transpose": t}
        args = (data, indices, indptr, v)
        yield f"csrmv-T={t}", catalog.csrmv_p, catalog.csrmv, args, statics


CASES = list(_cases())


@pytest.fixture(autouse=True)
def sm90():
    pk.config.set_compute_capability("9.0")
    yield
    pk.config.set_compute_capability(None)


def test_the_catalog_declares_gpu_tunables():
    declared = {
        b for _, op, *_ in CASES for b, spec in op.tunables("gpu").items() if spec
    }
    assert {"triton", "numba_cuda"} <= declared


@pytest.mark.slow
# JAX 0.11 deprecates Pallas' Triton backend (a warning at every lowering); it is
# the GPU path that lowers without a GPU, as tests/backends/pallas/ says.
@pytest.mark.filterwarnings(
    "ignore:The Pallas Triton backend is deprecated:DeprecationWarning"
)
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_gpu_candidate_lowers_for_cuda_and_reaches_its_kernel(case):
    _, op, call, args, kwargs = case
    tunables = {
        b: spec for b, spec in op.tunables("gpu").items() if spec and _installed(b)
    }
    if not tunables:
        pytest.skip(f"{op.name}: no GPU backend with tunables is installed here")
    (bound,) = bound_calls(lambda *a: call(*a, **kwargs), args, op.primitive)
    candidates, cut = enumerate_candidates(tunables)
    assert cut == 0 and len(candidates) == sum(
        int(np.prod([len(values) for _, values in spec])) for spec in tunables.values()
    )
    programs: dict[str, set[str]] = {}
    for candidate in candidates:
        params = {**bound.statics, **dict(candidate.params)}

        def bind(*xs, backend=candidate.backend, params=params):
            return op.primitive.bind(*xs, outs=bound.params["outs"], backend=backend,
                                     **params)  # fmt: skip

        text = (
            jax.jit(bind)
            .trace(*bound.operands)
            .lower(lowering_platforms=("cuda",))
            .as_text()
        )
        assert "stablehlo.custom_call" in text, candidate.label
        assert "callback" not in text, f"{candidate.label} fell back to a callback"
        programs.setdefault(candidate.backend, set()).add(text)
    for backend, texts in programs.items():
        n = sum(c.backend == backend for c in candidates)
        assert len(texts) == n, f"{backend}: {n} candidates, {len(texts)} programs"
