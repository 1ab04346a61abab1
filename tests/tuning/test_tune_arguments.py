"""``op.tune()``'s arguments (issue 34): every bad one is a polykernel error naming
the argument, what it got and what it takes — raised before anything is measured.

"Before anything is measured" is checked directly: the primitive's generators and
its benchmark data function append to a list when called, and the list stays
empty.
"""

from __future__ import annotations

import json
import math
import os
import re

import jax
import pytest
from tuning_ops import configs

import polykernel as pk
from polykernel.benchmark import BenchmarkConfig
from polykernel.dispatch import table

FAST = {"max_seconds": 60.0, "case_seconds": 0.3}


@pytest.fixture(autouse=True)
def own_config_dir(tmp_path, monkeypatch):
    """Each test tunes into its own config directory (its own tuned.json)."""
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(tmp_path / "config"))


def _watched(name: str) -> tuple[pk.XLACustomKernel, list[str]]:
    """A primitive whose generators and benchmark data record every call."""
    called: list[str] = []

    def jax_raw(outs, unroll, **kw):
        called.append(f"jax_raw(unroll={unroll})")
        return lambda x: 2 * x

    def numba(outs, **kw):
        called.append("numba")
        raise AssertionError("never built: the arguments are refused first")

    def data(*, platform):
        called.append(f"data({platform})")
        return configs((8,))

    op = pk.XLACustomKernel(name)
    op.def_jax_raw_kernel(jax_raw, platform="cpu", tune={"unroll": [1, 2]})
    op.def_numba_kernel(numba)
    op.def_benchmark_data(data)
    op.def_call(
        lambda x, **kw: op(x, outs=jax.ShapeDtypeStruct(x.shape, x.dtype), **kw)
    )
    return op, called


def _refused(request, error, message, **kwargs) -> None:
    """``tune(**kwargs)`` raises ``error`` with ``message`` (after the primitive's
    name) and calls nothing of the primitive's."""
    op, called = _watched(f"tune.args.{request.node.name}")
    arguments = {"platform": "cpu", "configs": configs((8,)), **FAST, **kwargs}
    with pytest.raises(error, match=re.escape(f"'{op.name}'.tune(): {message}")):
        op.tune(**arguments)
    assert called == []


SECONDS = "must be a finite number of seconds > 0, got"


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (math.nan, pk.TuningValueError, f"max_seconds {SECONDS} nan."),
        (math.inf, pk.TuningValueError, f"max_seconds {SECONDS} inf."),
        (-1, pk.TuningValueError, f"max_seconds {SECONDS} -1."),
        (0.0, pk.TuningValueError, f"max_seconds {SECONDS} 0.0."),
        (
            True,
            pk.TuningTypeError,
            "max_seconds must be a number of seconds, got bool: True.",
        ),
        ("1", pk.TuningTypeError, "max_seconds must be a number of seconds, got str"),
        (
            None,
            pk.TuningTypeError,
            "max_seconds must be a number of seconds, got NoneType: None.",
        ),
    ],
    ids=["nan", "inf", "negative", "zero", "bool", "str", "none"],
)
def test_max_seconds_is_a_finite_positive_number(value, error, message, request):
    _refused(request, error, message, max_seconds=value)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (-1, pk.TuningValueError, "max_candidates must be >= 1, got -1."),
        (0, pk.TuningValueError, "max_candidates must be >= 1, got 0."),
        (
            True,
            pk.TuningTypeError,
            "max_candidates must be an int >= 1 or None, got bool: True.",
        ),
        (
            1.5,
            pk.TuningTypeError,
            "max_candidates must be an int >= 1 or None, got float: 1.5.",
        ),
        (
            "3",
            pk.TuningTypeError,
            "max_candidates must be an int >= 1 or None, got str: '3'.",
        ),
    ],
    ids=["negative", "zero", "bool", "float", "str"],
)
def test_max_candidates_is_a_positive_int_or_none(value, error, message, request):
    _refused(request, error, message, max_candidates=value)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (math.nan, pk.TuningValueError, f"case_seconds {SECONDS} nan."),
        (0, pk.TuningValueError, f"case_seconds {SECONDS} 0."),
        (-2.0, pk.TuningValueError, f"case_seconds {SECONDS} -2.0."),
        (
            "2",
            pk.TuningTypeError,
            "case_seconds must be a number of seconds, got str: '2'.",
        ),
        (
            False,
            pk.TuningTypeError,
            "case_seconds must be a number of seconds, got bool: False.",
        ),
    ],
    ids=["nan", "zero", "negative", "str", "bool"],
)
def test_case_seconds_is_a_finite_positive_number(value, error, message, request):
    _refused(request, error, message, case_seconds=value)


SPREAD = "target_spread must be a finite fraction (IQR / median) > 0 and < 10, got"


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, pk.TuningValueError, f"{SPREAD} 0."),
        (-0.1, pk.TuningValueError, f"{SPREAD} -0.1."),
        (math.nan, pk.TuningValueError, f"{SPREAD} nan."),
        (20, pk.TuningValueError, f"{SPREAD} 20."),
        (
            "x",
            pk.TuningTypeError,
            "target_spread must be a fraction (IQR / median), got str: 'x'.",
        ),
        (
            None,
            pk.TuningTypeError,
            "target_spread must be a fraction (IQR / median), got NoneType: None.",
        ),
    ],
    ids=["zero", "negative", "nan", "too-large", "str", "none"],
)
def test_target_spread_is_a_fraction_a_timing_rule_takes(
    value, error, message, request
):
    _refused(request, error, message, target_spread=value)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, pk.TuningValueError, "passes must be >= 1, got 0."),
        (2.0, pk.TuningTypeError, "passes must be an int >= 1, got float: 2.0."),
        (None, pk.TuningTypeError, "passes must be an int >= 1, got NoneType: None."),
    ],
    ids=["zero", "float", "none"],
)
def test_passes_is_a_positive_int(value, error, message, request):
    _refused(request, error, message, passes=value)


@pytest.mark.parametrize("name", ["rtol", "atol"])
@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (-1e-3, pk.TuningValueError, "must be finite and >= 0, got -0.001."),
        (math.nan, pk.TuningValueError, "must be finite and >= 0, got nan."),
        (math.inf, pk.TuningValueError, "must be finite and >= 0, got inf."),
        (
            "x",
            pk.TuningTypeError,
            "must be a number or None (the per-dtype default), got str: 'x'.",
        ),
        (
            True,
            pk.TuningTypeError,
            "must be a number or None (the per-dtype default), got bool: True.",
        ),
    ],
    ids=["negative", "nan", "inf", "str", "bool"],
)
def test_tolerances_are_finite_non_negative_numbers(
    name, value, error, message, request
):
    _refused(request, error, f"{name} {message}", **{name: value})


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (
            ["cpu", "cpu"],
            pk.TuningValueError,
            "platform names ['cpu'] more than once; name each once.",
        ),
        ("fpga", pk.TuningValueError, "platform ['fpga'] not among ['cpu', 'gpu',"),
        (["cpu", "fpga"], pk.TuningValueError, "platform ['fpga'] not among"),
        (
            [],
            pk.TuningValueError,
            "platform is an empty list; name at least one of ['cpu', 'gpu', 'tpu']",
        ),
        (3, pk.TuningTypeError, "platform must be a list of names from ['cpu', "),
        (
            ["cpu", 3],
            pk.TuningTypeError,
            "platform must be a list of names from ['cpu', 'gpu', 'tpu'], or None, "
            "got list: ['cpu', 3].",
        ),
    ],
    ids=["twice", "unknown", "unknown-in-list", "empty", "int", "int-in-list"],
)
def test_platform_is_known_platforms_each_named_once(value, error, message, request):
    _refused(request, error, message, platform=value)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (
            "numba",
            pk.TuningTypeError,
            "backends must be a list of backend names, e.g. backends=['numba'], got "
            "the string 'numba'.",
        ),
        (
            ["nope"],
            pk.TuningValueError,
            "backends ['nope'] not among ['jax_raw', 'numba']; name some of those, "
            "or pass None for all.",
        ),
        (
            [],
            pk.TuningValueError,
            "backends is an empty list; name at least one of ['jax_raw', 'numba'], "
            "or pass None for all.",
        ),
        (
            ["numba", "numba"],
            pk.TuningValueError,
            "backends names ['numba'] more than once; name each once.",
        ),
        (
            {"numba"},
            pk.TuningTypeError,
            "backends must be a list of names from ['jax_raw', 'numba'], or None, "
            "got set",
        ),
    ],
    ids=["string", "unknown", "empty", "twice", "set"],
)
def test_backends_is_a_list_of_registered_names_each_once(
    value, error, message, request
):
    _refused(request, error, message, backends=value)


CASE = BenchmarkConfig("n=4", (configs((4,))[0].args[0],))
FIX = "; e.g. configs=[BenchmarkConfig('n=1000', (x,))]."


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (
            CASE,
            pk.TuningTypeError,
            "configs must be a list of BenchmarkConfig, got BenchmarkConfig",
        ),
        (
            "n=4",
            pk.TuningTypeError,
            f"configs must be a list of BenchmarkConfig, got str: 'n=4'{FIX}",
        ),
        (
            [CASE, (1, 2)],
            pk.TuningTypeError,
            f"configs must hold BenchmarkConfig objects only, got tuple: (1, 2){FIX}",
        ),
        ([], pk.TuningValueError, f"configs is empty: there is no case to tune{FIX}"),
    ],
    ids=["bare-config", "string", "not-a-config", "empty"],
)
def test_configs_is_a_non_empty_list_of_benchmark_configs(
    value, error, message, request
):
    _refused(request, error, message, configs=value)


def test_benchmark_data_that_returns_no_cases_is_named(request, monkeypatch):
    op, called = _watched("tune.args.no-data-cases")
    op.def_benchmark_data(lambda *, platform: called.append("data") or None)
    with pytest.raises(
        pk.TuningTypeError,
        match=re.escape(
            f"'{op.name}'.tune(): the benchmark data function's result for platform "
            f"'cpu' must be a list of BenchmarkConfig, got NoneType: None"
        ),
    ):
        op.tune(platform="cpu", **FAST)
    assert called == ["data"]  # only the data function ran


@pytest.mark.parametrize("name", ["save", "verbose", "contention"])
@pytest.mark.parametrize("value", [1, "yes", None], ids=["int", "str", "none"])
def test_flags_are_true_or_false(name, value, request):
    message = f"{name} must be True or False, got {type(value).__name__}: {value!r}."
    _refused(request, pk.TuningTypeError, message, **{name: value})


def test_an_unwritable_config_dir_is_refused_before_measuring(tmp_path, monkeypatch):
    op, called = _watched("tune.args.config-is-a-file")
    config = tmp_path / "a-file"
    config.write_text("")
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(config))
    with pytest.raises(
        pk.TuningError,
        match=re.escape(
            f"polykernel tuned table: the config directory {config} is not a "
            f"directory. Remove it, or point $POLYKERNEL_CONFIG_DIR at a directory "
            f"you own, or tune with save=False (--no-save)."
        ),
    ):
        op.tune(platform="cpu", configs=configs((8,)), **FAST)
    assert called == []
    # without save the table is never touched: tuning runs
    report = op.tune(platform="cpu", configs=configs((8,)), save=False, **FAST)
    assert report.saved_to is None and report.winners()


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root writes into read-only directories",
)
def test_a_read_only_config_dir_is_refused_before_measuring(tmp_path, monkeypatch):
    op, called = _watched("tune.args.read-only")
    config = tmp_path / "config"
    config.mkdir()
    config.chmod(0o500)
    monkeypatch.setenv("POLYKERNEL_CONFIG_DIR", str(config))
    try:
        with pytest.raises(
            pk.TuningError,
            match=re.escape(
                f"polykernel tuned table: cannot write to {config} (the config "
                f"directory {config} is there, and it is read-only). Point "
                f"$POLYKERNEL_CONFIG_DIR at a writable directory you own, or tune "
                f"with save=False (--no-save)."
            ),
        ):
            op.tune(platform="cpu", configs=configs((8,)), **FAST)
    finally:
        config.chmod(0o700)
    assert called == []


def test_good_arguments_run_and_every_error_is_a_tuning_error(request):
    op, called = _watched("tune.args.good")
    report = op.tune(
        platform=("cpu",),
        configs=(configs((8,))[0],),
        backends=("jax_raw",),
        max_seconds=30,
        max_candidates=2,
        rtol=0,
        atol=1e-6,
        target_spread=1,
        case_seconds=1,
        passes=1,
        save=False,
    )
    assert set(report.winners()) == {"n=8"}
    assert "jax_raw(unroll=1)" in called and "numba" not in called
    assert issubclass(pk.TuningTypeError, pk.TuningError)
    assert issubclass(pk.TuningTypeError, TypeError)
    assert issubclass(pk.TuningValueError, pk.TuningError)
    assert issubclass(pk.TuningValueError, ValueError)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: p.mkdir(parents=True), "is a directory"),
        (
            lambda p: p.write_text(json.dumps({"format": table.FORMAT, "version": 99})),
            "it was written by a newer polykernel (table version 99",
        ),
    ],
    ids=["directory", "newer"],
)
def test_a_table_that_cannot_be_rewritten_is_refused_before_measuring(
    make, why, request
):
    op, called = _watched(f"tune.args.{request.node.name}")
    path = table.tuned_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    make(path)
    with pytest.raises(pk.TuningError) as raised:
        op.tune(platform="cpu", configs=configs((8,)), **FAST)
    message = str(raised.value)
    assert message.startswith(f"polykernel tuned table {path}: ")
    assert why in message and "it is not rewritten." in message
    assert message.endswith("or tune with save=False (--no-save).")
    assert called == []
