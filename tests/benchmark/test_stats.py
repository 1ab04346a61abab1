"""Timing loop and statistics, driven by a scripted fake clock."""

from __future__ import annotations

import pytest

from polykernel.benchmark import (
    BenchmarkConfig,
    BenchmarkRecord,
    benchmark_function,
    compute_stats,
    time_function,
)


class FakeClock:
    """Returns scripted times; counts how often it was read."""

    def __init__(self, times):
        self.times = list(times)
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.times.pop(0)


def test_compute_stats_known_values():
    s = compute_stats([0.004, 0.001, 0.003, 0.002, 0.010])  # seconds, unsorted
    assert s.n == 5
    assert s.median_ms == pytest.approx(3.0)
    assert s.p25_ms == pytest.approx(2.0)
    assert s.p75_ms == pytest.approx(4.0)
    assert s.iqr_ms == pytest.approx(2.0)
    assert s.min_ms == pytest.approx(1.0)
    assert s.max_ms == pytest.approx(10.0)
    assert s.mean_ms == pytest.approx(4.0)
    assert s.std_ms == pytest.approx(3.5355339, rel=1e-6)  # sample std
    one = compute_stats([0.002])
    assert (one.median_ms, one.std_ms, one.p25_ms, one.p75_ms) == (2.0, 0.0, 2.0, 2.0)


def test_compute_stats_interpolates_percentiles():
    s = compute_stats([0.001, 0.002, 0.003, 0.004])
    assert s.median_ms == pytest.approx(2.5)
    assert s.p25_ms == pytest.approx(1.75)
    assert s.p75_ms == pytest.approx(3.25)


def test_compute_stats_empty():
    with pytest.raises(ValueError, match=r"no times to summarise \(n_runs must be"):
        compute_stats([])


def test_time_function_separates_compile_and_divides_batches():
    calls = []
    blocked = []
    # compile: 0 -> 5; run 1: 10 -> 16; run 2: 20 -> 23 (3 calls per interval)
    clock = FakeClock([0.0, 5.0, 10.0, 16.0, 20.0, 23.0])
    t = time_function(
        lambda x: calls.append(x) or x * 2,
        (21,),
        n_warmup=4,
        n_runs=2,
        n_batch_per_run=3,
        clock=clock,
        block=lambda out: blocked.append(out) or out,
    )
    assert t.compile_s == 5.0
    assert t.times_s == [2.0, 1.0]
    assert t.output == 42
    assert len(calls) == 1 + 4 + 2 * 3  # the warm-up is never timed
    assert clock.reads == 6
    assert blocked[-1] == [42, 42, 42]  # one block per interval, on all outputs


def test_time_function_default_block_uses_jax():
    import jax.numpy as jnp

    t = time_function(lambda: jnp.arange(3) + 1, n_warmup=0, n_runs=2)
    assert t.output.tolist() == [1, 2, 3]
    assert len(t.times_s) == 2 and all(x >= 0 for x in t.times_s)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"n_runs": 0}, r"n_runs must be an integer >= 1, got 0"),
        ({"n_warmup": -1}, r"n_warmup must be an integer >= 0, got -1"),
        ({"n_batch_per_run": 1.5}, r"n_batch_per_run must be an integer >= 1, got 1.5"),
        ({"n_runs": True}, r"n_runs must be an integer >= 1, got True"),
    ],
)
def test_time_function_rejects_bad_counts(kw, match):
    with pytest.raises(ValueError, match=match):
        time_function(lambda: 0, **kw)


def test_benchmark_function_reference_tuple():
    import jax.numpy as jnp

    mean, std, lo, hi, out = benchmark_function(lambda a, b: a + b, 1, 3, data=(1, 2))
    assert out == 3
    assert 0 <= lo <= mean <= hi and std >= 0
    timing = benchmark_function(
        lambda x: jnp.sin(x) * 2, 0, 4, n_batch_per_run=3, data=(jnp.ones(8),)
    )
    assert len(timing) == 5 and timing.mean == timing[0] and timing.std == timing[1]
    assert timing.min <= timing.mean <= timing.max
    assert timing.output.shape == (8,)


def test_benchmark_function_std_is_the_population_std(monkeypatch):
    from polykernel.benchmark import timing

    ticks = iter([0.0, 1.0, 10.0, 11.0, 20.0, 23.0])  # compile, then 1 s and 3 s
    # benchmark_function keeps the reference's signature (no clock argument), so
    # the fake clock goes in as time_function's default.
    defaults = timing.time_function.__kwdefaults__
    monkeypatch.setitem(defaults, "clock", lambda: next(ticks))
    mean, std, lo, hi, _ = benchmark_function(lambda: 0, 0, 2)
    assert (mean, std, lo, hi) == (2.0, 1.0, 1.0, 3.0)  # pstdev, not stdev (1.41)


def test_record_noise_flag_and_dict_round_trip():
    quiet = BenchmarkRecord("cpu", "a", "n", median_ms=10.0, p25_ms=9.8, p75_ms=10.5)
    noisy = BenchmarkRecord("cpu", "a", "n", median_ms=10.0, p25_ms=9.0, p75_ms=10.5)
    failed = BenchmarkRecord("cpu", "a", "n", success=False, error="boom")
    assert quiet.relative_iqr == pytest.approx(0.07) and not quiet.noisy
    assert noisy.relative_iqr == pytest.approx(0.15) and noisy.noisy
    assert failed.iqr_ms is None and failed.relative_iqr is None and not failed.noisy
    data = noisy.to_dict() | {"unknown_future_field": 1}
    assert BenchmarkRecord.from_dict(data) == noisy


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"name": ""}, r"name must be a non-empty string, got ''"),
        ({"kernel_kwargs": [1]}, r"'c': kernel_kwargs must be a dict, got list"),
        ({"data_kwargs": None}, r"'c': data_kwargs must be a dict, got NoneType"),
        ({"work": (0, "B")}, r"work must be \(amount > 0, unit\).*got \(0, 'B'\)"),
        ({"work": 5}, r"work must be \(amount > 0, unit\)"),
    ],
)
def test_config_validation(kw, match):
    with pytest.raises(TypeError, match=match):
        BenchmarkConfig(**({"name": "c"} | kw))


def test_config_put_args_returns_a_copy_on_the_device():
    import jax
    import numpy as np

    cfg = BenchmarkConfig(
        "c", [np.ones(3, np.float32), 2.5, None], {"k": 1}, {"d": 2}, work=(12, "B")
    )
    assert isinstance(cfg.args, tuple)
    moved = cfg.put_args(jax.devices("cpu")[0])
    assert isinstance(moved, BenchmarkConfig) and moved is not cfg
    x, s, n = moved.args
    assert isinstance(x, jax.Array) and x.devices() == {jax.devices("cpu")[0]}
    assert s == 2.5 and n is None
    assert isinstance(cfg.args[0], np.ndarray)  # the original is untouched
    assert (moved.name, moved.kernel_kwargs, moved.data_kwargs, moved.work) == (
        "c",
        {"k": 1},
        {"d": 2},
        (12, "B"),
    )
    assert isinstance(
        BenchmarkConfig("d", (np.zeros(2),)).put_args().args[0], jax.Array
    )
    assert cfg.label == "c"
