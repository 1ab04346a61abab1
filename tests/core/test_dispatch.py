"""Measured dispatch: the lookup (exact, nearest, family, default), what always wins,
and that the lowering under jit, vmap, grad and export compiles the choice.

Tables are written directly (fabricated entries), so every decision is exact and
no timing is involved; ``tests/tuning`` measures.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from dispatch_support import N, entry, make, spec

import polykernel as pk
from polykernel.dispatch import device_identity, misses, table
from polykernel.dispatch.writing import clear_entries, record_entries


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))


def test_without_a_tuned_entry_the_default_is_used_and_counted_as_a_miss():
    op = make("dispatch.miss")
    d = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (d.backend, dict(d.params), d.reason) == ("jax_raw", {}, "default")
    assert any(k.primitive == "dispatch.miss" for k in misses())


def test_exact_nearest_and_family_matches():
    name = "dispatch.match"
    op = make(name)
    record_entries(
        [
            entry(op, (10,), "numba", {"block": 4}),
            entry(op, (20,), "jax_raw", {}),
        ]
    )
    exact = op.dispatch(spec(N), outs=spec(N), platform="cpu")
    assert (exact.backend, dict(exact.params), exact.reason) == (
        "numba",
        {"block": 4},
        "exact",
    )
    near = op.dispatch(spec(4000), outs=spec(4000), platform="cpu")  # bucket 12
    assert (near.backend, near.reason) == ("numba", "nearest")
    far = op.dispatch(spec(2**19), outs=spec(2**19), platform="cpu")  # bucket 19
    assert (far.backend, far.reason) == ("jax_raw", "nearest")
    clear_entries([name])
    record_entries(
        [entry(op, (10,), "numba", {"block": 2}, device="another CPU (64 cores)")]
    )
    fam = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (fam.backend, dict(fam.params), fam.reason) == (
        "numba",
        {"block": 2},
        "family",
    )


def test_a_shipped_table_for_another_device_kind_and_family_falls_back(tmp_path):
    name = "dispatch.shipped"
    op = make(name)
    shipped = tmp_path / "shipped.json"
    other = entry(
        op, (10,), "numba", {"block": 4}, device="NVIDIA H200", family="sm_90"
    )
    shipped.write_text(
        json.dumps(
            {
                "format": "polykernel.tuned",
                "version": 2,
                "entries": {name: [other.to_json()]},
            }
        )
    )
    op.def_tuned_table(shipped)
    assert op.dispatch(spec(), outs=spec(), platform="cpu").reason == "default"
    # Same family: used, and said so.
    _, family = device_identity("cpu")
    same = entry(op, (10,), "numba", {"block": 2}, device="x", family=family)
    shipped.write_text(
        json.dumps(
            {
                "format": "polykernel.tuned",
                "version": 2,
                "entries": {name: [same.to_json()]},
            }
        )
    )
    d = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (d.backend, dict(d.params), d.reason) == ("numba", {"block": 2}, "family")
    # The user's own table wins over the shipped one.
    record_entries([entry(op, (10,), "jax_raw", {})])
    assert op.dispatch(spec(), outs=spec(), platform="cpu").backend == "jax_raw"


def test_an_entry_point_ships_a_table(tmp_path, monkeypatch):
    name = "dispatch.entry_point"
    op = make(name)
    path = tmp_path / "ep.json"
    path.write_text(
        json.dumps(
            {
                "format": "polykernel.tuned",
                "version": 2,
                "entries": {
                    name: [entry(op, (10,), "numba", {"block": 4}).to_json()]
                },
            }
        )
    )
    module = types.ModuleType("pk_test_tuned_tables")
    module.TABLE = str(path)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    point = importlib.metadata.EntryPoint(
        "mine", "pk_test_tuned_tables:TABLE", group=table.ENTRY_POINT_GROUP
    )
    real = importlib.metadata.entry_points

    def fake(**selection):
        if selection.get("group") == table.ENTRY_POINT_GROUP:
            return importlib.metadata.EntryPoints([point])
        return real(**selection)

    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    monkeypatch.setattr(table, "_entry_points_read", False)
    assert op.dispatch(spec(), outs=spec(), platform="cpu").reason == "exact"


def test_explicit_backend_set_default_and_set_backend_always_win():
    name = "dispatch.wins"
    op = make(name)
    record_entries([entry(op, (10,), "numba", {"block": 4})])
    d = op.dispatch(spec(), outs=spec(), platform="cpu", backend="jax_raw")
    assert (d.backend, d.reason) == ("jax_raw", "explicit")
    # An explicit backend still gets its own tuned parameters.
    d = op.dispatch(spec(), outs=spec(), platform="cpu", backend="numba")
    assert (dict(d.params), d.reason) == ({"block": 4}, "explicit")
    pk.set_backend("cpu", "jax_raw")
    try:
        assert op.dispatch(spec(), outs=spec(), platform="cpu").reason == "preference"
    finally:
        pk.clear_backends()
    op.set_default("cpu", "jax_raw")
    d = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert (d.backend, d.reason) == ("jax_raw", "set_default")


def test_the_lowering_compiles_the_choice_under_jit_vmap_grad_and_export():
    name = "dispatch.lowered"
    seen: list = []
    op = make(name, seen)
    op.def_jvp_rule2(lambda t, x, **kw: [2 * t])
    record_entries([entry(op, (10,), "numba", {"block": 4})])
    x = jnp.arange(N, dtype=jnp.float32)
    call = jax.jit(lambda x: op(x, outs=spec()))
    np.testing.assert_allclose(call(x), 2 * x)
    assert seen[-1] == ("numba", 4)
    seen.clear()
    batched = jax.jit(jax.vmap(lambda r: op(r, outs=spec())))(jnp.ones((3, N)))
    assert batched.shape == (3, N) and seen[-1] == ("numba", 4)
    seen.clear()
    value, g = jax.jit(jax.value_and_grad(lambda x: op(x, outs=spec()).sum()))(x)
    np.testing.assert_allclose(g, 2 * np.ones(N))
    np.testing.assert_allclose(value, 2 * x.sum())
    assert ("numba", 4) in seen
    seen.clear()
    exported = pk.export(jax.jit(lambda x: op(x, outs=spec())))(spec())
    assert seen == [("numba", 4)]
    np.testing.assert_allclose(exported.call(x), 2 * x)


def test_a_keyword_the_call_passes_wins_over_the_tuned_value():
    name = "dispatch.keyword"
    seen: list = []
    op = make(name, seen)
    record_entries([entry(op, (10,), "numba", {"block": 4})])
    jax.jit(lambda x: op(x, outs=spec(), block=2))(jnp.ones(N))
    assert seen[-1] == ("numba", 2)


def test_untuned_parameters_get_their_first_candidate():
    seen: list = []
    op = make("dispatch.first", seen)
    jax.jit(lambda x: op(x, outs=spec(), backend="numba"))(jnp.ones(N))
    assert seen[-1] == ("numba", 1)


@pytest.mark.slow  # over 2 s in make test-fast (processes, compiles)
def test_new_entries_reach_functions_jitted_before():
    name = "dispatch.epoch"
    seen: list = []
    op = make(name, seen)
    f = jax.jit(lambda x: op(x, outs=spec()))
    f(jnp.ones(N))
    assert seen[-1][0] == "jax_raw"
    op.tune(
        platform="cpu",
        configs=[pk.BenchmarkConfig("n", (np.ones(N, np.float32),), {"outs": spec()})],
        backends=["numba"],
        case_seconds=0.1,
    )
    f(jnp.ones(N))
    assert seen[-1][0] == "numba"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "it is not valid JSON"),
        (
            json.dumps({"format": "other.tool", "version": 1}),
            "it is not a polykernel tuned table",
        ),
        (
            json.dumps({"format": "polykernel.tuned", "version": 99, "entries": {}}),
            "it is table version 99; this polykernel reads 1 to 2",
        ),
        (
            json.dumps(
                {
                    "format": "polykernel.tuned",
                    "version": 2,
                    "entries": {"dispatch.bad": [{"bucket": "x"}]},
                }
            ),
            "1 malformed entry skipped",
        ),
    ],
    ids=["corrupt", "foreign", "newer", "malformed"],
)
def test_a_corrupt_or_foreign_table_is_ignored_with_one_warning_naming_it(text, why):
    path = table.tuned_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    op = make(f"dispatch.bad.{why[3:14]}")
    where = re.escape(f"polykernel tuned table {path}: ")
    with pytest.warns(pk.TuningWarning, match=where + why):
        d = op.dispatch(spec(), outs=spec(), platform="cpu")
    assert d.reason == "default"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per file and cause
        op.dispatch(spec(), outs=spec(), platform="cpu")


def test_miss_warnings_on_request():
    op = make("dispatch.warned")
    pk.config.set_tuning_miss_warnings(True)
    try:
        with pytest.warns(
            pk.TuningWarning, match=r"no tuned entry for 'dispatch.warned'"
        ):
            op.dispatch(spec(), outs=spec(), platform="cpu")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per key
            op.dispatch(spec(), outs=spec(), platform="cpu")
    finally:
        pk.config.set_tuning_miss_warnings(None)


@pytest.mark.parametrize(
    ("tune", "error", "message"),
    [
        (
            [1, 2],
            pk.KernelTypeError,
            r"expected a dict \{parameter: \[candidate values\]\}",
        ),
        (
            {"BLOCK": 256},
            pk.KernelTypeError,
            r"the candidates of 'BLOCK' must be a list",
        ),
        ({"BLOCK": []}, pk.KernelRegistrationError, r"'BLOCK' has no candidate value"),
        ({"2x": [1]}, pk.KernelRegistrationError, r"parameter names are identifiers"),
        ({"outs": [1]}, pk.KernelRegistrationError, r"'outs' is reserved"),
        (
            {"b": [[1], [2]]},
            pk.KernelTypeError,
            r"candidate \[1\] of 'b' is a list \(use a tuple\)",
        ),
        ({"b": [1, 1]}, pk.KernelRegistrationError, r"'b' lists a candidate twice"),
    ],
)
def test_bad_tune_declarations_are_refused(tune, error, message, request):
    op = pk.XLACustomKernel(f"dispatch.bad_tune.{request.node.callspec.id}")
    with pytest.raises(error, match=r"def_kernel\(tune=\.\.\.\): " + message):
        op.def_kernel("jax_raw", "cpu", lambda outs, **kw: None, tune=tune)


def test_explain_dispatch_traces_without_running():
    name = "dispatch.explain"
    seen: list = []
    op = make(name, seen)
    record_entries([entry(op, (10,), "numba", {"block": 2})])

    def program(x):
        return jax.lax.cond(True, lambda x: op(x, outs=spec()), lambda x: x, x)

    (d,) = pk.explain_dispatch(program, spec(), platform="cpu")
    assert (d.backend, dict(d.params), d.reason) == ("numba", {"block": 2}, "exact")
    assert seen == []  # nothing lowered or run
    assert str(d).startswith("dispatch.explain on cpu: numba(block=2) [exact]")


def test_between_two_tuned_buckets_the_candidate_fast_on_both_sides_wins():
    name = "dispatch.between"
    op = make(name)
    record_entries(
        [
            # below: jax_raw wins, numba(block=4) close; above: jax_raw collapses
            entry(op, (9,), "jax_raw", {}, ratios={
                ("jax_raw", None): 1.0, ("numba", 4): 1.08, ("numba", 1): 1.5}),
            entry(op, (11,), "numba", {"block": 4}, ratios={
                ("jax_raw", None): 1.9, ("numba", 4): 1.0, ("numba", 1): 1.2}),
        ]
    )  # fmt: skip
    d = op.dispatch(spec(1000), outs=spec(1000), platform="cpu")  # bucket 10
    assert (d.backend, dict(d.params), d.reason) == ("numba", {"block": 4}, "nearest")
    # on the tuned buckets themselves, their own winners
    below = op.dispatch(spec(500), outs=spec(500), platform="cpu")
    above = op.dispatch(spec(2000), outs=spec(2000), platform="cpu")
    assert (below.backend, below.reason) == ("jax_raw", "exact")
    assert (above.backend, dict(above.params)) == ("numba", {"block": 4})
    # nearer to one side: that side's winner, as before
    one_side = op.dispatch(spec(2**14), outs=spec(2**14), platform="cpu")
    assert (one_side.backend, dict(one_side.params)) == ("numba", {"block": 4})


def test_between_buckets_without_a_shared_candidate_the_first_entry_wins():
    name = "dispatch.between_disjoint"
    op = make(name)
    record_entries(
        [
            entry(op, (9,), "jax_raw", {}, ratios={("jax_raw", None): 1.0}),
            entry(op, (11,), "numba", {"block": 2}, ratios={("numba", 2): 1.0}),
        ]
    )
    d = op.dispatch(spec(1000), outs=spec(1000), platform="cpu")
    assert (d.backend, d.reason) == ("jax_raw", "nearest")
