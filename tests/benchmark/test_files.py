"""Result files: reference layouts load; damaged files name the file and field."""

from __future__ import annotations

import json
import math
import pickle

import pytest
from reference_records import REFERENCE_RECORD_FIELDS

from polykernel.benchmark import BenchmarkRecord, BenchmarkResult

# Written by the reference (brainevent 0.3.0) for two records, one of them failed.
REFERENCE_CSV = """platform,backend,transpose,nnz,label,mean_ms,std_ms,min_ms
cpu,numba,False,10,n=10,1.2346,0.1,1.1
cpu,warp,False,10,n=10,FAILED,,
"""
REFERENCE_JSON = """{
  "primitive_name": "ref.op",
  "records": [
    {"platform": "cpu", "backend": "numba", "label": "n=10", "mean_ms": 1.23456,
     "std_ms": 0.1, "min_ms": 1.1, "throughput": null, "success": true,
     "error": null, "kernel_kwargs": {"transpose": false}, "data_kwargs": {"nnz": 10}},
    {"platform": "cpu", "backend": "warp", "label": "n=10", "mean_ms": NaN,
     "std_ms": NaN, "min_ms": NaN, "throughput": null, "success": false,
     "error": "RuntimeError: boom", "kernel_kwargs": {"transpose": false},
     "data_kwargs": {"nnz": 10}}
  ]
}
"""


def _record_json(**changes) -> str:
    rec = {"platform": "cpu", "backend": "a", "label": "x", "mean_ms": 1.0} | changes
    return json.dumps({"primitive_name": "p", "records": [rec]})


def _assert_load_names_the_file(path, text: str, match: str) -> None:
    """Loading ``text`` saved as ``path`` raises a ValueError naming the file."""
    path.write_text(text)
    with pytest.raises(
        ValueError, match=rf"BenchmarkResult.load: '.*{path.name}'.*" + match
    ):
        BenchmarkResult.load(path)


def test_reference_json_loads(tmp_path):
    path = tmp_path / "ref.json"
    path.write_text(REFERENCE_JSON)
    result = BenchmarkResult.load(path)
    assert result.primitive_name == "ref.op"
    ok, failed = result.records
    assert (ok.backend, ok.mean_ms, ok.kernel_kwargs) == (
        "numba",
        1.23456,
        {"transpose": False},
    )
    assert not failed.success and math.isnan(failed.mean_ms)
    assert failed.error == "RuntimeError: boom"
    assert result.fastest().backend == "numba"


def test_reference_csv_loads(tmp_path):
    path = tmp_path / "ref.csv"
    path.write_text(REFERENCE_CSV)
    ok, failed = BenchmarkResult.load(path).records
    assert (ok.platform, ok.backend, ok.label, ok.mean_ms) == (
        "cpu",
        "numba",
        "n=10",
        1.2346,
    )
    assert (ok.std_ms, ok.min_ms, ok.success) == (0.1, 1.1, True)
    assert not failed.success and math.isnan(failed.mean_ms) and failed.std_ms is None


def test_to_dict_has_the_reference_layout_first():
    rec = BenchmarkRecord("cpu", "a", "x", 1.0, 0.1, 0.9, None, True, None, {}, {})
    data = BenchmarkResult([rec], "p").to_dict()
    assert list(data)[:2] == ["primitive_name", "records"]
    assert list(data["records"][0])[:11] == REFERENCE_RECORD_FIELDS
    assert data["format"] == "polykernel.benchmark" and data["version"] == 1
    json.dumps(data)  # JSON-ready


@pytest.mark.parametrize(
    "text, match",
    [
        (
            '{"primitive_name": "p", "records": [3]}',
            r"record 0: expected an object .* got 3 \(int\)",
        ),
        (
            '{"primitive_name": "p", "records": [null]}',
            r"record 0: expected an object .* got None",
        ),
        (
            '{"primitive_name": "p", "records": {}}',
            r"field 'records': expected a list of records, got \{\} \(dict\)",
        ),
        (
            '{"primitive_name": "p"}',
            r"field 'records': expected a list of records, got None",
        ),
        (
            '{"primitive_name": 3, "records": []}',
            r"field 'primitive_name': expected a string, got 3",
        ),
        (
            _record_json(mean_ms="abc"),
            r"record 0, field 'mean_ms': expected a number or null, got 'abc' \(str\)",
        ),
        (
            _record_json(mean_ms=True),
            r"record 0, field 'mean_ms': expected a number or null, got True",
        ),
        (
            _record_json(success="yes"),
            r"field 'success': expected true or false, got 'yes'",
        ),
        (
            _record_json(kernel_kwargs=[1]),
            r"field 'kernel_kwargs': expected an object \(dict\), got \[1\]",
        ),
        (_record_json(n=1.5), r"field 'n': expected an integer, got 1.5"),
        (_record_json(backend=None), r"field 'backend': expected a string, got None"),
        (
            '{"primitive_name": "p", "records": [{"platform": "cpu", "label": "x"}]}',
            r"record 0: missing field\(s\) \['backend'\]",
        ),
        ("[1, 2]", r"is not a benchmark result file \(expected a JSON object"),
        ('{"format": "other", "records": []}', r"is not a benchmark result file"),
        (
            '{"format": "polykernel.benchmark", "version": 2, "records": []}',
            r"has format version 2; this polykernel reads version 1",
        ),
        ("{", r"is not valid JSON"),
        pytest.param(
            "[" * 100_000, r"is not valid JSON \(maximum recursion", id="deep-nesting"
        ),
        ("", r"is empty; it holds no benchmark result"),
        ("  \n", r"is empty"),
    ],
)
def test_damaged_json_names_file_and_field(tmp_path, text, match):
    _assert_load_names_the_file(tmp_path / "bad.json", text, match)


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "platform,backend,label,mean_ms\ncpu,a,x,abc\n",
            r"line 2, field 'mean_ms': expected a number or null, got 'abc'",
        ),
        (
            "platform,backend,label,mean_ms\ncpu,a,x,1\ncpu,b,x,fast\n",
            r"line 3, field 'mean_ms'",
        ),
        (
            "platform,backend,label,n\ncpu,a,x,1.5\n",
            r"field 'n': expected an integer, got '1.5'",
        ),
        (
            "platform,backend,label,success\ncpu,a,x,maybe\n",
            r"field 'success': expected true or false, got 'maybe'",
        ),
        (
            "platform,backend,label,kernel_kwargs\ncpu,a,x,[1]\n",
            r"field 'kernel_kwargs': expected an object \(dict\), got '\[1\]' \(str\)",
        ),
        (
            'platform,backend,label,data_kwargs\ncpu,a,x,"{bad"\n',
            r"field 'data_kwargs': expected an object \(dict\), got '\{bad'",
        ),
        (
            "platform,backend,label,mean_ms\ncpu,a\n",
            r"line 2: the row has fewer cells than the header",
        ),
        (
            "a,b\n1,2\n",
            r"is not a benchmark result CSV \(missing columns "
            r"\['platform', 'backend', 'label'\]; found \['a', 'b'\]\)",
        ),
        ("", r"is empty"),
    ],
)
def test_damaged_csv_names_file_line_and_field(tmp_path, text, match):
    _assert_load_names_the_file(tmp_path / "bad.csv", text, match)


def test_csv_header_only_is_an_empty_result(tmp_path):
    path = BenchmarkResult([], "p").save(tmp_path / "empty.csv")
    assert path.read_text().startswith("platform,backend,label")
    assert len(BenchmarkResult.load(path)) == 0


def test_pickle_round_trip_and_damage(tmp_path):
    rec = BenchmarkRecord(
        "cpu", "a", "x", 1.0, 0.1, 0.9, None, True, None, {"k": (1, 2)}, {}
    )
    result = BenchmarkResult([rec], "p")
    path = result.save(tmp_path / "r.pkl")
    with path.open("rb") as handle:  # a plain pickle of the result, as the reference
        assert isinstance(pickle.load(handle), BenchmarkResult)
    back = BenchmarkResult.load(path)
    assert back.records == [rec] and back.records[0].kernel_kwargs == {"k": (1, 2)}
    assert BenchmarkResult.load(
        result.save(tmp_path / "r.bin", format="pkl"), format="pkl"
    ).records == [rec]
    assert "trusted source" in BenchmarkResult.load.__doc__
    assert "trusted" in BenchmarkResult.save.__doc__
    (tmp_path / "garbage.pkl").write_bytes(b"not a pickle")
    with pytest.raises(
        ValueError, match=r"'.*garbage.pkl' is not a readable pickle \(UnpicklingError"
    ):
        BenchmarkResult.load(tmp_path / "garbage.pkl")
    (tmp_path / "dict.pkl").write_bytes(pickle.dumps({"records": []}))
    with pytest.raises(
        ValueError, match=r"'.*dict.pkl' holds a dict, not a BenchmarkResult"
    ):
        BenchmarkResult.load(tmp_path / "dict.pkl")
    broken = BenchmarkResult([rec], "p")
    broken._records.append(7)
    (tmp_path / "broken.pkl").write_bytes(pickle.dumps(broken))
    with pytest.raises(ValueError, match=r"'.*broken.pkl': record 1 is a int \(7\)"):
        BenchmarkResult.load(tmp_path / "broken.pkl")
    with pytest.raises(ValueError, match=r"'.*r.bin' is not a UTF-8 text file"):
        BenchmarkResult.load(tmp_path / "r.bin")  # pickled, but read as JSON
    (tmp_path / "empty.pkl").write_bytes(b"")
    with pytest.raises(ValueError, match=r"'.*empty.pkl' is empty"):
        BenchmarkResult.load(tmp_path / "empty.pkl")
