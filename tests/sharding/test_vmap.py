"""vmap over a batch axis split across devices gives the unsharded result.

The default batching rule loops over the batch; on a mesh of ``Explicit`` axes
(``jax.make_mesh``'s default) a ``lax.scan`` over a split axis is refused by JAX, so
the loop runs per device on its own rows and the batch stays split. Every catalog
primitive on every CPU backend, on meshes of 2 and 4 host devices
(``vmap_sharding_child.py``: one fresh process with 4 devices, forked by the zygote
before any JAX backend starts, XLA fixes the count at start; the 2-device meshes use
the first two, with 4 batch rows per device, the 4-device ones 2). The cases of a
mesh size are reported under ``2dev``/``4dev``.
"""

from __future__ import annotations

import os

import pytest
from subprocess_support import SUPPORT, last_json, run_python

CHILD = SUPPORT / "vmap_sharding_child.py"
PRIMITIVES = ("scaled_add", "csrmv", "csrmv_T", "event_csrmv", "lif_step")
SIZES = (2, 4)  # devices per mesh


@pytest.fixture(scope="module")
def meshes() -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    argv = [str(n) for n in SIZES]
    out = last_json(
        run_python(CHILD, *argv, env=env, timeout=600, forked=True, kind="full")
    )
    assert out["devices"] == max(SIZES)
    return out["meshes"]


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"{n}dev")
def report(request, meshes: dict) -> dict:
    found = meshes[str(request.param)]
    assert found["devices"] == request.param  # the mesh spans that many devices
    return found["results"]


def _cases(report: dict, prefix: str) -> dict:
    found = {k: v for k, v in report.items() if k.startswith(prefix)}
    assert found, f"no {prefix} cases ran"
    return found


@pytest.mark.slow
@pytest.mark.parametrize("mesh", ["explicit", "auto", "shard_map"])
def test_every_catalog_primitive_and_cpu_backend_matches_the_unsharded_vmap(
    report, mesh
):
    cases = _cases(report, f"{mesh}/")
    assert {k.split("/")[1] for k in cases} == set(PRIMITIVES)
    for backend in ("jax_raw", "numba", "cuda_raw"):
        assert f"{mesh}/csrmv/{backend}" in cases
    for key, result in cases.items():
        assert "raised" not in result, f"{key}:\n{result.get('raised')}"
        assert result["error"] <= 1e-5, (key, result)


@pytest.mark.slow
@pytest.mark.parametrize("mesh", ["explicit", "shard_map"])
def test_the_batch_stays_split_over_the_devices(report, mesh):
    for key, result in _cases(report, f"{mesh}/").items():
        assert result["spec"].startswith("P('i'"), (key, result)


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["batch_on_axis_1", "nested_vmap", "grad_through_vmap", "two_mesh_axes"]
)
def test_edge_cases(report, case):
    key = f"edge/{case}"
    result = report[key]
    assert "raised" not in result, result.get("raised")
    assert result["error"] <= 1e-5, result
    want = "P(('a', 'b')" if case == "two_mesh_axes" else "P('i'"
    assert result["spec"].startswith(want), result
