"""Launch-parameter values through a table: exact round trips, refusals at
``def_kernel``, and tuple candidates that dispatch runs as tuned."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.dispatch import Choice, Entry, Key, Measurement, Scope, table, values
from polykernel.dispatch.writing import record_entries

N = 1000  # bucket 10


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))


def _spec(n: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct((n,), jnp.float32)


def _op(name: str, tune: dict, seen: list) -> pk.XLACustomKernel:
    """A one-backend primitive ``scale * x + shift`` whose generator records the
    launch parameters it gets (``tile=(scale, shift)`` when tuned over ``tile``)."""

    def generator(outs, **params):
        seen.append(params)
        scale, shift = params.get("tile", (2, 0))
        return lambda x: x * scale + shift

    generator.__signature__ = _signature(tune)  # the names tune= declares
    op = pk.XLACustomKernel(f"dispatch.values.{name}")
    op.def_kernel("jax_raw", "cpu", generator, tune=tune)
    return op


def _signature(tune: dict) -> inspect.Signature:
    params = [inspect.Parameter("outs", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in tune]
    return inspect.Signature(params)


def _entry(op, bucket: int, winner: dict, grid: list[dict]) -> Entry:
    """A fresh tuned entry of ``op`` (the identities of its kernels now) whose
    ``winner`` is 1.5x faster than every other choice of ``grid``."""
    key = op._key_of("cpu", [_spec(N)], [_spec(N)], {})
    registered = op._registered("cpu")
    measured = tuple(
        Measurement(
            Choice.of("jax_raw", g),
            "ok",
            ratio=1.0 if g == winner else 1.5,
            ratio_error=0.01,
        )
        for g in grid
    )
    return Entry(
        dataclasses.replace(key, bucket=(bucket,)),
        Scope.TUNED,
        Choice.of("jax_raw", winner),
        Choice.of("jax_raw", grid[0]),
        (("jax_raw", registered.identity("jax_raw")),),
        measured,
        {"shape": [[2**bucket]]},
    )


EVERY_KIND = {
    "tile": [(1, 2), (4, (8, 16))],
    "flag": [False, True],
    "count": [1, 2],
    "scale": [1.0, 0.5],
    "mode": ["a", "b"],
}


def test_every_kind_of_value_comes_back_exactly_from_a_saved_table():
    seen: list = []
    op = _op("every", EVERY_KIND, seen)
    winner = {"tile": (4, (8, 16)), "flag": True, "count": 2, "scale": 0.5,
              "mode": "b"}  # fmt: skip
    grid = [{n: c[0] for n, c in EVERY_KIND.items()}, winner]
    record_entries([_entry(op, 10, winner, grid)])
    raw = json.loads(table.tuned_path().read_text())["entries"][op.name][0]
    assert raw["winner"]["params"]["tile"] == {"tuple": [4, {"tuple": [8, 16]}]}
    (back,) = table.entries_for(op.name)
    got = dict(back.winner.params)
    assert got == winner
    assert [type(got[n]) for n in ("flag", "count", "scale", "mode")] == [
        bool, int, float, str,
    ]  # fmt: skip
    assert type(got["tile"]) is tuple and type(got["tile"][1]) is tuple
    decision = op.dispatch(_spec(N), outs=_spec(N), platform="cpu")
    assert (decision.reason, dict(decision.params)) == ("exact", winner)


@pytest.mark.parametrize("value", [1, 1.0, True])
def test_one_one_point_zero_and_true_are_three_candidates(value):
    seen: list = []
    op = _op(f"three_{type(value).__name__}", {"k": [1, 1.0, True]}, seen)
    assert len({values.token(v) for v in (1, 1.0, True)}) == 3
    grid = [{"k": 1}, {"k": 1.0}, {"k": True}]
    record_entries([_entry(op, 10, {"k": value}, grid)])
    (back,) = table.entries_for(op.name)
    assert type(dict(back.winner.params)["k"]) is type(value)
    decision = op.dispatch(_spec(N), outs=_spec(N), platform="cpu")
    assert decision.reason == "exact"
    assert type(decision.params["k"]) is type(value)
    jax.jit(lambda x: op(x, outs=_spec(N)))(jnp.ones(N, jnp.float32))
    assert type(seen[-1]["k"]) is type(value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (np.int64(256), r"a NumPy int64 \(use a Python value, e\.g\. int\(v\)"),
        (np.float32(0.5), r"a NumPy float32 \(use a Python value"),
        ([1, 2], r"a list \(use a tuple\)"),
        ((1, [2]), r"a list \(use a tuple\)"),
        (None, r"None"),
        (math.nan, r"the non-finite float nan"),
        (math.inf, r"the non-finite float inf"),
        ((1, -math.inf), r"the non-finite float -inf"),
        (1j, r"a complex"),
    ],
    ids=[
        "np.int64",
        "np.float32",
        "list",
        "list-in-tuple",
        "None",
        "nan",
        "inf",
        "inf-in-tuple",
        "complex",
    ],
)
def test_def_kernel_refuses_a_value_a_table_cannot_hold(value, problem):
    op = pk.XLACustomKernel(f"dispatch.values.refused.{id(value)}")
    with pytest.raises(
        pk.KernelTypeError,
        match=rf"XLACustomKernel 'dispatch\.values\.refused\.\d+'\.def_kernel\(tune="
        rf"\.\.\.\): candidate .* of 'block' is {problem}.*; a candidate is a bool, "
        rf"int, finite float, str or a tuple of these",
    ):
        op.def_kernel("jax_raw", "cpu", lambda outs, block: None,
                      tune={"block": [1, value]})  # fmt: skip


def test_too_deep_a_tuple_is_refused():
    deep: tuple = (1,)
    for _ in range(values.MAX_DEPTH + 1):
        deep = (deep,)
    op = pk.XLACustomKernel("dispatch.values.deep")
    with pytest.raises(pk.KernelTypeError, match=r"is tuples nested deeper than 8"):
        op.def_kernel("jax_raw", "cpu", lambda outs, block: None,
                      tune={"block": [deep]})  # fmt: skip


TILES = {"tile": [(1, 2), (4, 8)]}


def test_tuple_candidates_run_as_tuned_and_between_two_tuned_buckets():
    """The tuned ``(4, 8)`` is what runs (not the first candidate) and what is
    reported; a size between two tuned buckets is answered (no unhashable list)."""
    seen: list = []
    op = _op("tiles", TILES, seen)
    grid = [{"tile": (1, 2)}, {"tile": (4, 8)}]
    record_entries([_entry(op, b, {"tile": (4, 8)}, grid) for b in (8, 12)])
    f = jax.jit(lambda x: op(x, outs=_spec(x.shape[0])))
    for n, reason in ((2**8, "exact"), (2**10, "nearest"), (2**12, "exact")):
        decision = op.dispatch(_spec(n), outs=_spec(n), platform="cpu")
        assert (decision.reason, dict(decision.params)) == (reason, {"tile": (4, 8)})
        x = jnp.arange(n, dtype=jnp.float32)
        np.testing.assert_array_equal(f(x), 4 * np.asarray(x) + 8)
        assert seen[-1] == {"tile": (4, 8)} and type(seen[-1]["tile"]) is tuple


def _slow_or_fast(outs, tile):
    if tile == (1, 2):  # the default: the same result, made slow

        def slow(x):
            body = lambda i, acc: acc + jnp.sin(acc) * 0.0  # noqa: E731
            return jax.lax.fori_loop(0, 400, body, x * 2.0)

        return slow
    return lambda x: x * 2.0


@pytest.mark.slow  # a real tuning run (about 2 s)
def test_a_tuned_tuple_winner_is_saved_as_a_tuple_and_runs():
    from tuning_ops import configs

    op = pk.XLACustomKernel("dispatch.values.tuned_tiles")
    op.def_kernel("jax_raw", "cpu", _slow_or_fast, tune=TILES)
    op.def_call(lambda x: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype)))
    op.tune(configs=configs((2**14,)), platform="cpu", case_seconds=0.2, passes=1)
    (entry,) = table.entries_for(op.name)
    assert entry.winner == Choice.of("jax_raw", {"tile": (4, 8)})
    decision = op.dispatch(_spec(2**14), outs=_spec(2**14), platform="cpu")
    assert (decision.reason, dict(decision.params)) == ("exact", {"tile": (4, 8)})
    # A size between tuned ones: answered from the nearest (no unhashable list).
    other = Key(op.name, "cpu", entry.key.device, entry.key.family,
                entry.key.signature, (10,))  # fmt: skip
    record_entries([dataclasses.replace(entry, key=other)])
    decision = op.dispatch(_spec(2**12), outs=_spec(2**12), platform="cpu")
    assert decision.reason == "nearest" and decision.params["tile"] == (4, 8)


@pytest.mark.parametrize(
    "value", [np.int64(4), [4, 8], math.nan], ids=["np.int64", "list", "nan"]
)
def test_an_entry_that_would_not_read_back_is_never_written(value):
    op = _op(f"unwritable_{type(value).__name__}", TILES, [])
    good = _entry(op, 10, {"tile": (4, 8)}, [{"tile": (1, 2)}, {"tile": (4, 8)}])
    record_entries([good])
    before = table.tuned_path().read_bytes()
    bad = dataclasses.replace(good, winner=Choice.of("jax_raw", {"tile": value}))
    with pytest.raises(
        pk.TuningError,
        match=rf"polykernel tuned table: the entry of '{op.name}' choosing "
        rf"jax_raw\(tile=.*\) cannot be written \(.*\); nothing was written\. "
        rf"Launch parameters and measured numbers must be values a table holds",
    ):
        record_entries([good, bad])
    assert table.tuned_path().read_bytes() == before
