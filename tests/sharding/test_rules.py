"""Partitioning rules: no all-gather under jit with sharded inputs, on 4 CPU devices.

The multi-device scenarios live in ``sharding_scenarios.py`` and run once, in one
child process (XLA fixes the device count when JAX starts; the child is forked by the
zygote, ``zygote.py``, before any backend starts); the tests below assert on
what it reports, including the compiled HLO. Rule parsing and single-device
behaviour are tested in this process.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from subprocess_support import SUPPORT, run_python

import polykernel as pk
from polykernel.sharding.rules import batch_rule, parse_rule

SCENARIOS = [
    "numba_without_rule",
    "numba_batch",
    "numba_batch_explicit_axes",
    "cpp_batch",
    "shard_map",
    "two_axes",
    "replicated_and_scalar_inputs",
    "lif_multi_output_and_grad",
    "csr_rows",
    "csr_transpose_rows",
    "bad_partition_result",
    "rule_rank_mismatch",
    "output_only_factor",
    "partition_results",
]


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory) -> dict:
    import os

    script = SUPPORT / "sharding_scenarios.py"
    out = run_python(
        script, *SCENARIOS, env=dict(os.environ), timeout=600, forked=True, kind="full"
    )
    report = json.loads(out.strip().splitlines()[-1])
    assert report["devices"] == 4
    for name, result in report["results"].items():
        assert "crashed" not in result, f"{name}:\n{result.get('crashed')}"
    return report["results"]


def assert_per_shard(facts: dict, shape: str, layouts: str | None = None) -> None:
    """One custom call on the per-shard shape, and no gather of its operands;
    ``layouts``: how its operand layout constraints begin."""
    assert not facts["all_gather"] and not facts["collective_permute"]
    assert len(facts["custom_calls"]) == 1
    assert facts["custom_calls"][0].split("=", 1)[1].strip().startswith(shape)
    if layouts is not None:
        assert f"operand_layout_constraints={layouts}" in facts["custom_calls"][0]


@pytest.mark.slow
def test_without_a_rule_the_call_is_gathered(four_devices):
    facts = four_devices["numba_without_rule"]
    assert facts["ok"] and facts["all_gather"]  # the problem the rules solve
    assert "custom-call(%all-gather" in facts["custom_calls"][0]


@pytest.mark.slow
@pytest.mark.parametrize(
    "scenario", ["numba_batch", "numba_batch_explicit_axes", "cpp_batch"]
)
def test_batch_partitioning_runs_once_per_shard(four_devices, scenario):
    facts = four_devices[scenario]
    assert facts["ok"] and facts["out_spec"] == "P('i',)"
    assert_per_shard(facts, "f32[4]")


@pytest.mark.slow
def test_numba_and_cpp_kernels_inside_shard_map(four_devices):
    assert four_devices["shard_map"] == {"numba": True, "cuda_raw": True}


@pytest.mark.slow
def test_two_leading_axes_on_a_two_dimensional_mesh(four_devices):
    facts = four_devices["two_axes"]
    assert facts["ok"]
    assert_per_shard(facts, "f32[4,3]")


@pytest.mark.slow
def test_replicated_and_scalar_inputs_stay_whole(four_devices):
    facts = four_devices["replicated_and_scalar_inputs"]
    assert facts["ok"]
    assert_per_shard(facts, "f32[4]", layouts="{f32[4]{0}, f32[2]{0}, f32[]}")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax_raw", "numba", "cuda_raw"])
def test_catalog_elementwise_multi_output_and_grad(four_devices, backend):
    facts = four_devices["lif_multi_output_and_grad"][backend]
    assert facts["ok"] and not facts["all_gather"]
    if backend != "jax_raw":
        assert len(facts["custom_calls"]) == 1
        assert "(f32[4]{0}, pred[4]{0}) custom-call" in facts["custom_calls"][0]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax_raw", "numba", "cuda_raw"])
def test_csrmv_row_blocks_match_the_unsharded_call(four_devices, backend):
    facts = four_devices["csr_rows"][backend]
    assert facts["equal"] and facts["out_spec"] == "P('i',)"
    assert facts["all_reduce"] == 0
    if backend == "jax_raw":
        assert not facts["all_gather"] and not facts["custom_calls"]
        return
    # 40 rows / 4 shards; whole data and indices (362 entries), an 11-entry indptr
    # window per shard.
    assert_per_shard(facts, "f32[10]", layouts="{f32[362]{0}, s32[362]{0}, s32[11]{0}")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax_raw", "numba", "cuda_raw"])
def test_csrmv_transpose_sums_row_blocks_with_one_all_reduce(four_devices, backend):
    facts = four_devices["csr_transpose_rows"][backend]
    assert facts["max_abs_err"] < 1e-5  # the all-reduce adds in another order
    assert not facts["all_gather"] and facts["all_reduce"] == 1
    if backend != "jax_raw":
        assert_per_shard(facts, "f32[30]")
        assert "s32[11]{0}, f32[10]{0}}" in facts["custom_calls"][0]


@pytest.mark.slow
def test_partition_function_with_wrong_block_shape_is_reported(four_devices):
    error = four_devices["bad_partition_result"]["error"]
    assert "XLACustomKernel 'scen.bad_partition': the partition function returned " in (
        error
    )
    assert "expected this shard's outputs [((4,), dtype('float32'))]" in error


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "shown"),
    [("none", "NoneType (None)"), ("dict", "dict ({'y': "), ("float", "float (2.0)")],
)
def test_a_partition_result_that_is_not_arrays_is_our_error(four_devices, case, shown):
    error = four_devices["partition_results"][case]["error"]
    assert (
        f"KernelTypeError: XLACustomKernel 'scen.partition_{case}': the partition "
        f"function returned {shown}"
    ) in error, error
    assert "as block 0, expected an array shaped like shard.outs[0]" in error


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "values"),
    [("count_by_name", [4.0 * i for i in range(16)]),
     ("index_by_name", [float(i) for i in range(16)])],
)  # fmt: skip
def test_shard_methods_take_one_axis_by_name(four_devices, case, values):
    assert four_devices["partition_results"][case] == {"values": values}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "method", "shown"),
    [("count_unknown_axis", "count", "str: 'dev'"),
     ("index_not_a_name", "index", "int: 5")],
)  # fmt: skip
def test_shard_methods_refuse_what_is_not_a_mesh_axis(
    four_devices, case, method, shown
):
    error = four_devices["partition_results"][case]["error"]
    assert (
        f"KernelTypeError: XLACustomKernel 'scen.partition_{case}': shard.{method}() "
        f"takes mesh axis names, a tuple of them (e.g. shard.in_axes(0)) or one name, "
        f"from ['i'] (got {shown})."
    ) in error, error


@pytest.mark.slow
def test_rule_that_does_not_fit_the_call_is_reported(four_devices):
    error = four_devices["rule_rank_mismatch"]["error"]
    assert error.startswith("KernelRegistrationError: XLACustomKernel 'scen.bad_rule'")
    assert "gives input 0 2 factor(s) but it has rank 1" in error


# -- in this process (one device) --------------------------------------------------
def test_parse_rule_splits_inputs_and_outputs():
    assert parse_rule("op", "i j, j -> i") == ((("i", "j"), ("j",)), (("i",),))
    assert parse_rule("op", "nnz, ptr -> row, ") == (
        (("nnz",), ("ptr",)),
        (("row",), ()),
    )


@pytest.mark.parametrize(
    ("rule", "match"),
    [
        ("i j", r"exactly one '->'"),
        ("i -> j -> k", r"exactly one '->'"),
        ("(i j) -> i", r"has factor '\(i'.*compound factors"),
        ("... i -> i", r"has factor '\.\.\.'"),
        (3, r"must be a string such as 'i j, j -> i' \(got int: 3\)"),
    ],
)
def test_bad_rule_strings_are_rejected_at_definition(rule, match):
    op = pk.XLACustomKernel(f"test.sharding.bad_rule_text.{rule!s}")
    with pytest.raises(pk.KernelRegistrationError, match=match):
        op.def_sharding_rule(rule)


def test_bad_rule_arguments_are_rejected():
    op = pk.XLACustomKernel("test.sharding.bad_args")
    with pytest.raises(pk.KernelRegistrationError, match=r"n_axes must be an int >= 1"):
        op.def_batch_partitioning(0)
    with pytest.raises(pk.KernelRegistrationError, match=r"replicated_inputs must be"):
        op.def_batch_partitioning(1, replicated_inputs=["x"])
    with pytest.raises(pk.KernelRegistrationError, match=r"partition must be callable"):
        op.def_sharding_rule("i -> i", partition=3)
    with pytest.raises(pk.KernelRegistrationError, match=r"need_replication must be"):
        op.def_sharding_rule("i -> i", need_replication=["2x"])


def test_batch_rule_gives_trailing_and_replicated_dims_their_own_factors():
    rule = batch_rule(1, replicated_inputs=(1,))
    ins = [jax.ShapeDtypeStruct((8, 3), jnp.float32), jax.ShapeDtypeStruct((5,), "f")]
    outs = [jax.ShapeDtypeStruct((8,), jnp.float32)]
    text, need = rule(ins, outs)
    assert text == "b0 in0_1, in1_0 -> b0"
    assert need == ("in0_1", "in1_0")


def test_a_rule_changes_nothing_on_one_device():
    op = pk.XLACustomKernel("test.sharding.one_device")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x: x * 2)
    op.def_batch_partitioning()
    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    f = jax.jit(lambda x: op(x, outs=spec))
    x = jnp.arange(4.0, dtype=jnp.float32)
    np.testing.assert_array_equal(f(x), x * 2)
    assert "custom_partitioning" not in f.lower(x).as_text()
    assert "CustomSPMDPartitioning" not in f.lower(x).as_text()


def test_csr_row_block_pads_an_uneven_split_with_empty_rows():
    from polykernel.catalog.csrmv import _row_block

    indptr = jnp.array([0, 2, 3, 7, 9, 12], jnp.int32)  # 5 rows
    blocks = [np.asarray(_row_block(indptr, jnp.int32(b), 3, 2)) for b in range(3)]
    assert [b.tolist() for b in blocks] == [[0, 2, 3], [3, 7, 9], [9, 12, 12]]


@pytest.mark.parametrize("transpose", [False, True])
def test_jax_raw_row_window_matches_the_rows_it_covers(transpose):
    from polykernel.catalog import csrmv_p
    from polykernel.catalog._support import random_csr

    data, indices, indptr = random_csr(12, 7, 0.5, seed=3)
    lo, hi = 4, 9
    v = np.random.default_rng(1).random(hi - lo if transpose else 7)
    v = v.astype(np.float32)
    n_out = 7 if transpose else hi - lo
    window = csrmv_p(
        data,
        indices,
        indptr[lo : hi + 1],
        v,
        outs=jax.ShapeDtypeStruct((n_out,), jnp.float32),
        shape=(hi - lo, 7),
        transpose=transpose,
        row_window=True,
        backend="jax_raw",
    )
    dense = np.zeros((12, 7), np.float32)
    for r in range(12):
        for k in range(indptr[r], indptr[r + 1]):
            dense[r, indices[k]] += data[k]
    block = dense[lo:hi]
    expected = block.T @ v if transpose else block @ v
    np.testing.assert_allclose(window, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # its module's child process: over 2 s in make test-fast
def test_a_factor_only_the_output_carries_never_repeats_block_zero(four_devices):
    want = [120.0 * (j + 1) for j in range(16)]  # not [120, 240, 360, 480] x 4
    results = four_devices["output_only_factor"]
    assert len(results) == 4
    for case, result in results.items():
        assert result["values"] == want, case
        assert result["out_spec"] in ("P('i',)", "PartitionSpec('i',)"), case
