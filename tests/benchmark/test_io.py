"""BenchmarkResult: comparison table, JSON/CSV round trip, PNG plot, selection."""

from __future__ import annotations

import json
import math
import sys

import pytest

from polykernel.benchmark import BenchmarkRecord, BenchmarkResult
from polykernel.benchmark.table import format_si
from polykernel.errors import BackendUnavailableError


def _rec(backend, label, median, **kw):
    base = {"p25_ms": median * 0.98, "p75_ms": median * 1.02, "n": 5}
    return BenchmarkRecord(
        "cpu",
        backend,
        label,
        mean_ms=median,
        std_ms=0.01,
        min_ms=median * 0.9,
        median_ms=median,
        max_ms=median * 1.1,
        compile_ms=12.5,
        **(base | kw),
    )


@pytest.fixture
def result():
    return BenchmarkResult(
        [
            _rec("jax_raw", "n=10", 2.0, kernel_kwargs={"alpha": 0.5, "mode": "x"}),
            _rec(
                "numba",
                "n=10",
                1.0,
                reference_backend="jax_raw",
                matches_reference=True,
                max_abs_diff=0.0,
                throughput=2.5e9,
                throughput_unit="B/s",
            ),
            _rec("jax_raw", "n=99", 4.0, p25_ms=3.0, p75_ms=5.0),
            _rec(
                "numba",
                "n=99",
                5.0,
                reference_backend="jax_raw",
                matches_reference=False,
                max_abs_diff=math.inf,
            ),
            BenchmarkRecord(
                "cpu",
                "cuda_raw",
                "n=99",
                success=False,
                error="KernelCompilationError: nope\nsecond line",
                data_kwargs={"n": 99},
            ),
        ],
        primitive_name="demo.op",
    )


def test_table_marks_best_noise_mismatch_and_failures(result):
    text = result.table()
    lines = text.splitlines()
    assert lines[0] == "demo.op on cpu: median ms per call (speed-up vs baseline)"
    assert "jax_raw (baseline)" in lines[1] and "cuda_raw" in lines[1]
    n10 = next(line for line in lines if line.startswith("n=10"))
    assert "1 (2.00x) 2.5 GB/s *" in n10
    n99 = next(line for line in lines if line.startswith("n=99"))
    assert "4 *!" in n99  # fastest and noisy (IQR 50 % of median)
    assert "5 (0.80x) x" in n99 and "FAILED" in n99
    assert "MISMATCH demo.op [cpu] n=99: numba vs jax_raw, max |diff| = inf" in text
    assert "FAILED demo.op [cpu] n=99 / cuda_raw: KernelCompilationError: nope" in text
    assert "second line" not in text
    assert "(0.50x)" in result.table(baseline="numba")
    assert str(result) == text
    with pytest.raises(
        ValueError,
        match=r"baseline backend 'triton' is not in this "
        r"result \(backends: \['jax_raw', 'numba', 'cuda_raw'\]\)",
    ):
        result.table(baseline="triton")
    assert BenchmarkResult([]).table() == "(no benchmark records)"


def test_selection_helpers(result):
    assert result.fastest("n=10").backend == "numba"
    assert result.fastest("n=99").backend == "jax_raw"
    assert result.fastest().median_ms == 1.0
    assert result.fastest("nope") is None
    per = result.fastest_per_config()
    assert {k: r.backend for k, r in per.items()} == {
        ("demo.op", "n=10"): "numba",
        ("demo.op", "n=99"): "jax_raw",
    }
    assert [r.backend for r in result.failures] == ["cuda_raw"]
    assert [(r.backend, r.label) for r in result.noisy] == [("jax_raw", "n=99")]
    # numba is faster on n=10 but disagreed on n=99; cuda_raw failed: jax_raw wins.
    assert result.best_backends() == {"demo.op": {"cpu": "jax_raw"}}
    assert repr(result) == str(result) and len(result) == 5


def test_best_backend_uses_geometric_mean_slowdown():
    r = BenchmarkResult(
        [
            _rec("a", "s", 1.0),
            _rec("b", "s", 1.5),
            _rec("a", "l", 100.0),
            _rec("b", "l", 50.0),
        ],
        primitive_name="p",
    )
    # a: slowdowns (1, 2) -> gm 1.41; b: (1.5, 1) -> gm 1.22
    assert r.best_backends() == {"p": {"cpu": "b"}}


@pytest.mark.parametrize("suffix", ["json", "csv", "pkl"])
def test_save_load_round_trip(result, tmp_path, suffix):
    path = result.save(tmp_path / f"out.{suffix}")
    loaded = BenchmarkResult.load(path)
    assert loaded.primitive_name == "demo.op"
    assert loaded.records == result.records
    assert loaded.table() == result.table()
    assert loaded.mismatches == result.mismatches
    assert [p.name for p in tmp_path.iterdir()] == [f"out.{suffix}"]


def test_explicit_format_and_json_content(result, tmp_path):
    path = result.save(tmp_path / "out.txt", format="json")
    data = json.loads(path.read_text())
    assert data["format"] == "polykernel.benchmark" and data["version"] == 1
    assert data["records"][0]["kernel_kwargs"] == {"alpha": 0.5, "mode": "x"}
    assert result.to_dict()["records"][4]["error"].startswith("KernelCompilation")
    assert BenchmarkResult.load(path, format="json").records == result.records


def test_unjsonable_kwargs_are_stored_as_text(tmp_path):
    import numpy as np

    rec = _rec(
        "a",
        "x",
        1.0,
        kernel_kwargs={"dtype": np.dtype("float32"), "k": np.int64(3), "shape": (2, 3)},
    )
    back = BenchmarkResult.load(BenchmarkResult([rec]).save(tmp_path / "r.json"))
    assert back.records[0].kernel_kwargs == {
        "dtype": "float32",
        "k": 3,
        "shape": [2, 3],
    }


def test_format_from_suffix_or_argument(result, tmp_path):
    # No known suffix: JSON, as the reference's save/load default.
    plain = result.save(tmp_path / "out")
    assert json.loads(plain.read_text())["primitive_name"] == "demo.op"
    assert BenchmarkResult.load(plain).records == result.records
    as_csv = result.save(tmp_path / "data.txt", format="CSV")
    assert as_csv.read_text().startswith("platform,backend,label,mean_ms")
    assert BenchmarkResult.load(as_csv, format="csv").records == result.records
    with pytest.raises(
        ValueError,
        match=r"BenchmarkResult.save: unsupported format 'xlsx' for '.*out.xlsx'; "
        r"choose one of 'json', 'csv', 'pkl'",
    ):
        result.save(tmp_path / "out.xlsx", format="xlsx")
    with pytest.raises(ValueError, match=r"BenchmarkResult.load: unsupported format"):
        BenchmarkResult.load(plain, format="yaml")
    with pytest.raises(
        FileNotFoundError, match=r"BenchmarkResult.load: '.*nope.json' does not exist"
    ):
        BenchmarkResult.load(tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError, match=r"'.*' is not a file"):
        BenchmarkResult.load(tmp_path)


def test_plot_writes_png(result, tmp_path):
    path = result.plot(tmp_path / "sub" / "bench.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert path.stat().st_size > 1000
    assert result.plot(tmp_path / "c.png", y="compile_ms").exists()


def test_plot_errors(result, tmp_path):
    with pytest.raises(ValueError, match=r"y must be one of \('mean_ms'.*got 'x'"):
        result.plot(tmp_path / "a.png", y="x")
    with pytest.raises(ValueError, match=r"a.svg' must end in .png"):
        result.plot(tmp_path / "a.svg")
    with pytest.raises(
        ValueError, match=r"no successful record with a known mean_ms to plot"
    ):
        BenchmarkResult(result.failures).plot(tmp_path / "a.png")


def test_plot_without_matplotlib_names_the_extra(result, tmp_path, monkeypatch):
    # A None entry in sys.modules makes `import` fail exactly as if absent.
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(
        BackendUnavailableError,
        match=r"needs matplotlib, which is "
        r'not installed. Install it with: pip install "polykernel\[plot\]"',
    ):
        result.plot(tmp_path / "a.png")


def test_combine_and_format_si(result):
    other = BenchmarkResult([_rec("numba", "n=1", 1.0)], primitive_name="other.op")
    both = BenchmarkResult.combine([result, other])
    assert both.primitive_name == "" and len(both) == 6
    assert both.table().splitlines()[1].startswith("primitive")
    assert format_si(12_345_678, "B/s") == "12.35 MB/s"
    assert format_si(12.0, "FLOP/s") == "12 FLOP/s"
    assert format_si(3e12, "B/s") == "3 TB/s"
