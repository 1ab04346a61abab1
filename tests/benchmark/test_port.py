"""Port test: benchmark code written for the reference API runs after the import swap.

The primitive, its call function and benchmark-data function, and the result
handling below follow the reference's pages (``def_call``, ``def_benchmark_data``,
``benchmark()``) and its benchmark example step by step; only the import lines name
polykernel instead of ``brainevent``. A small Numba kernel with a pure-JAX twin keeps
it fast.
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
from reference_records import REFERENCE_RECORD_FIELDS

# The only lines that differ from reference code (brainevent._op.main,
# brainevent._op.benchmark, brainevent._error, brainevent).
from polykernel import XLACustomKernel, numba_kernel
from polykernel.benchmark import BenchmarkConfig, BenchmarkRecord, BenchmarkResult
from polykernel.core import registry
from polykernel.errors import BenchmarkDataFnNotProvidedError

PLATFORM = jax.devices()[0].platform
N_WARMUP = 2
N_RUNS = 5


@numba.njit
def scale_kernel(x, s, out):
    for i in range(out.size):
        out[i] = x[i] * s[0]


def scale_numba_generator(outs, **kwargs):
    kernel = numba_kernel(scale_kernel, outs[0])
    return lambda x, s: [kernel(x, s)]


def scale_jax_generator(outs, **kwargs):
    return lambda x, s: [x * s[0]]


scale_p = XLACustomKernel("porttest.scale")
scale_p.def_numba_kernel(scale_numba_generator)
scale_p.def_jax_raw_kernel(scale_jax_generator, platform="cpu")


def scale_p_call(x, *, scale, backend=None):
    """The user-facing call: prepares the arguments and invokes the primitive."""
    s = jnp.full((1,), scale, dtype=x.dtype)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return scale_p(x, s, outs=[out], backend=backend)[0]


def scale_benchmark_data(*, platform):
    configs = []
    for n in (1000, 5000):
        x = jnp.asarray(np.random.default_rng(n).random(n, dtype=np.float32))
        for scale in (2.0, 0.5):
            configs.append(
                BenchmarkConfig(
                    name=f"n={n},scale={scale}",
                    args=(x,),
                    kernel_kwargs={"scale": scale},
                    data_kwargs={"n": n},
                )
            )
    return configs


scale_p.def_call(scale_p_call)
scale_p.def_benchmark_data(scale_benchmark_data)


@pytest.fixture(scope="module")
def result():
    return scale_p.benchmark(platform=PLATFORM, n_warmup=N_WARMUP, n_runs=N_RUNS)


def test_call_delegates_to_the_call_function():
    x = jnp.arange(4, dtype=jnp.float32)
    np.testing.assert_allclose(scale_p.call(x, scale=2.0, backend="numba"), x * 2)
    np.testing.assert_allclose(scale_p.call(x, scale=3.0, backend="jax_raw"), x * 3)


def test_basic_run_sort_group_compare(result, capsys):
    print(result)
    result.print(sort_by="mean_ms")
    result.print(group_by="label", highlight_best=True)
    result.print(group_by="backend")
    result.print(
        sort_by="mean_ms",
        compare_by="backend == 'numba' and label == 'n=1000,scale=2.0'",
    )
    result.print(
        sort_by="mean_ms", compare_by=lambda row: row.get("backend") == "numba"
    )
    result.print(
        order_by=["scale", "label", "backend"], highlight_best=True, speedup_vs="numba"
    )
    result.print(vary_by=["scale", "backend"], speedup_vs="numba")
    out = capsys.readouterr().out
    assert out.count("BenchmarkResult: porttest.scale") == 7
    assert "vs_numba" in out and "speedup" in out
    assert len(result.records) == 8 and all(r.success for r in result.records)


def test_n_batch_per_run():
    r10 = scale_p.benchmark(
        platform=PLATFORM, n_warmup=N_WARMUP, n_runs=N_RUNS, n_batch_per_run=10
    )
    r10.print(sort_by="label")
    assert {r.n_batch_per_run for r in r10.records} == {10}


def test_records_programmatically(result, capsys):
    for rec in result.records:
        status = "OK" if rec.success else f"FAILED: {rec.error}"
        print(f"{rec.backend:10s} | {rec.label:20s} | {rec.mean_ms:.3f} ms | {status}")
    fastest = result.fastest()
    if fastest:
        best = f"{fastest.backend} ({fastest.label})"
        print(f"Best overall: {best} — {fastest.mean_ms:.3f} ms")
    labels = dict.fromkeys(r.label for r in result.records)
    winners = {}
    for label in labels:
        rec = result.fastest(label=label)
        if rec:
            winners[label] = rec.backend
            print(f"[{label}] winner: {rec.backend} ({rec.mean_ms:.4f} ms)")
    backend_times = defaultdict(list)
    for rec in result.records:
        if rec.success:
            backend_times[rec.backend].append(rec.mean_ms)
    for be, times in sorted(backend_times.items()):
        avg = sum(times) / len(times)
        print(f"{be:10s}: avg={avg:.4f} ms over {len(times)} configs")
    out = capsys.readouterr().out
    assert fastest is not None and "Best overall" in out
    assert set(winners) == set(labels) and set(winners.values()) <= {"numba", "jax_raw"}
    assert sorted(backend_times) == ["jax_raw", "numba"]


def test_save_and_load(result):
    with tempfile.TemporaryDirectory() as tmpdir:
        json_path = os.path.join(tmpdir, "bench.json")
        result.save(json_path, format="json")
        loaded_json = BenchmarkResult.load(json_path)
        csv_path = os.path.join(tmpdir, "bench.csv")
        result.save(csv_path, format="csv")
        loaded_csv = BenchmarkResult.load(csv_path)
        pkl_path = os.path.join(tmpdir, "bench.pkl")
        result.save(pkl_path, format="pkl")
        loaded_pkl = BenchmarkResult.load(pkl_path)
        d = result.to_dict()
    assert loaded_json.primitive_name == loaded_pkl.primitive_name == "porttest.scale"
    assert len(loaded_json.records) == len(loaded_csv.records) == 8
    assert loaded_pkl.records == result.records
    assert list(d.keys())[:2] == ["primitive_name", "records"]
    assert list(d["records"][0].keys())[:11] == REFERENCE_RECORD_FIELDS


def test_plot(result, tmp_path):
    fig = result.plot(x="label", y="mean_ms", hue="backend", kind="bar", show=False)
    fig.tight_layout()
    fig.savefig(tmp_path / "bench_bar.png", dpi=100)
    fig2 = result.plot(x="label", y="min_ms", hue="backend", kind="line", show=False)
    fig2.tight_layout()
    fig2.savefig(tmp_path / "bench_line.png", dpi=100)
    assert (tmp_path / "bench_bar.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "bench_line.png").stat().st_size > 1000


def test_custom_benchmark_data_with_data_kwargs(capsys):
    def rich_benchmark_data(*, platform):
        configs = []
        for n in (500, 2000):
            for density in (0.1, 0.5):
                x = jnp.ones(n, dtype=jnp.float32) * density
                configs.append(
                    BenchmarkConfig(
                        name=f"{n},d={density}",
                        args=(x,),
                        kernel_kwargs={"scale": 1.5},
                        data_kwargs={"n": n, "density": density},
                    )
                )
        return configs

    original_fn = scale_p._benchmark_data_fn
    scale_p.def_benchmark_data(rich_benchmark_data)
    try:
        result = scale_p.benchmark(platform=PLATFORM, n_warmup=N_WARMUP, n_runs=N_RUNS)
    finally:
        scale_p.def_benchmark_data(original_fn)
    result.print(group_by="label")
    header = capsys.readouterr().out.splitlines()[1]
    assert "density" in header and "scale" in header
    assert result.records[0].data_kwargs == {"n": 500, "density": 0.1}


def test_missing_data_fn():
    prim = XLACustomKernel("porttest._demo_no_data_fn")
    try:

        def _dummy_kg(**kw):
            def _kernel(*args):
                return (jnp.zeros(1),)

            return _kernel

        prim.def_numba_kernel(_dummy_kg)
        prim.def_call(lambda *a, **kw: jnp.zeros(1))
        with pytest.raises(BenchmarkDataFnNotProvidedError) as caught:
            prim.benchmark(platform="cpu")
        assert isinstance(caught.value, ValueError)
    finally:
        registry.unregister("porttest._demo_no_data_fn")


def _offline_record(platform, backend, label, mean_ms, std_ms, min_ms, size, nnz):
    """A successful record as the reference's offline-analysis example builds one."""
    return BenchmarkRecord(
        platform=platform, backend=backend, label=label,
        mean_ms=mean_ms, std_ms=std_ms, min_ms=min_ms, throughput=None,
        success=True, error=None,
        kernel_kwargs={"shape": (size, size)}, data_kwargs={"nnz": nnz},
    )  # fmt: skip


def test_offline_analysis(capsys):
    records = [
        _offline_record("cpu", "numba", "small", 3.2, 0.1, 3.0, 1000, 100_000),
        _offline_record("gpu", "pallas", "small", 0.4, 0.01, 0.38, 1000, 100_000),
        _offline_record("cpu", "numba", "large", 45.0, 1.2, 43.5, 10000, 10_000_000),
        _offline_record("gpu", "pallas", "large", 1.8, 0.05, 1.75, 10000, 10_000_000),
    ]
    combined = BenchmarkResult(records, primitive_name="spmv (cross-platform)")
    combined.print(group_by="label")
    combined.print(
        sort_by="mean_ms", compare_by="backend == 'numba' and platform == 'cpu'"
    )
    with tempfile.TemporaryDirectory() as tmpdir:
        p = os.path.join(tmpdir, "cross_platform.json")
        combined.save(p)
        reloaded = BenchmarkResult.load(p)
    out = capsys.readouterr().out
    assert len(reloaded.records) == 4
    assert reloaded.fastest(label="large").backend == "pallas"
    # The speed-up of each pallas row is against the cpu numba row of its config.
    assert "8.00x" in out and "25.00x" in out
