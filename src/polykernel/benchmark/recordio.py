"""One ``BenchmarkRecord`` from a file's JSON object or CSV row, checked field by field.

A results file may be damaged, hand-edited or written by another tool, so every
value is checked against its field's type; the error names the place (file, record
or line) and the field. Unknown keys or columns are ignored, which keeps files from
newer versions (or the reference's flat CSV with keyword columns) readable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any

from ..errors import BenchmarkValueError
from .record import BenchmarkRecord

__all__ = ["CSV_COLUMNS", "record_from_csv_row", "record_from_json", "record_to_csv"]

REQUIRED = ("platform", "backend", "label")
# The reference writes this word in the mean_ms column of a failed run.
FAILED_MARK = "FAILED"

_KIND_OF_ANNOTATION = {
    "str": "str",
    "str | None": "str?",
    "float | None": "num?",
    "bool": "bool",
    "bool | None": "bool?",
    "int": "int",
    "dict[str, Any]": "dict",
}
_DESCRIPTION = {
    "str": "a string",
    "str?": "a string or null",
    "num?": "a number or null",
    "bool": "true or false",
    "bool?": "true, false or null",
    "int": "an integer",
    "dict": "an object (dict)",
}
KINDS = {f.name: _KIND_OF_ANNOTATION[str(f.type)] for f in fields(BenchmarkRecord)}
CSV_COLUMNS = list(KINDS)


def _bad(where: str, name: str, kind: str, value: Any) -> BenchmarkValueError:
    return BenchmarkValueError(
        f"{where}, field {name!r}: expected {_DESCRIPTION[kind]}, got {value!r} "
        f"({type(value).__name__}). The file is damaged or was not written by "
        "BenchmarkResult.save; fix that field or re-run the benchmark."
    )


def _check(where: str, name: str, kind: str, value: Any) -> Any:
    optional = kind.endswith("?")
    if value is None and optional:
        return None
    base = kind.rstrip("?")
    if base in ("str", "dict", "bool"):
        typ = {"str": str, "dict": dict, "bool": bool}[base]
        if isinstance(value, typ):
            return dict(value) if isinstance(value, dict) else value
    elif isinstance(value, bool):
        pass
    elif base == "num" and isinstance(value, int | float):
        return float(value)
    elif base == "int" and isinstance(value, int):
        return value
    raise _bad(where, name, kind, value)


def _build(values: dict[str, Any], where: str) -> BenchmarkRecord:
    missing = [name for name in REQUIRED if name not in values]
    if missing:
        raise BenchmarkValueError(
            f"{where}: missing field(s) {missing}; every record needs {list(REQUIRED)}."
        )
    return BenchmarkRecord(**values)


def record_from_json(data: Any, where: str) -> BenchmarkRecord:
    """Check one JSON record object and build the record."""
    if not isinstance(data, Mapping):
        raise BenchmarkValueError(
            f"{where}: expected an object with the record's fields, got {data!r} "
            f"({type(data).__name__})."
        )
    values = {
        name: _check(where, name, KINDS[name], value)
        for name, value in data.items()
        if name in KINDS
    }
    return _build(values, where)


def _cell(where: str, name: str, kind: str, text: str) -> Any:
    base, optional = kind.rstrip("?"), kind.endswith("?")
    if text == "":
        if optional:
            return None
        default = next(f for f in fields(BenchmarkRecord) if f.name == name)
        if default.default is not MISSING:
            return default.default
        return {} if base == "dict" else ""
    try:
        if base == "num":
            return float(text)
        if base == "int":
            return int(text)
        if base == "bool":
            return {"true": True, "false": False}[text.strip().lower()]
        if base == "dict":
            return _check(where, name, kind, json.loads(text))
    except (ValueError, KeyError) as err:
        raise _bad(where, name, kind, text) from err
    return text


def record_from_csv_row(row: Mapping[str | None, Any], where: str) -> BenchmarkRecord:
    """Parse one CSV row (text cells) and build the record."""
    values: dict[str, Any] = {}
    extra = row.get(None)
    if extra:  # a long row: csv.DictReader files the cells past the header under None
        raise BenchmarkValueError(
            f"{where}: the row has {len(extra)} more cell(s) than the header "
            f"({list(extra)[:3]}); a cell holding a comma must be quoted. Fix the "
            f"row or write the file again with BenchmarkResult.save."
        )
    failed = row.get("mean_ms") == FAILED_MARK
    for name, text in row.items():
        if name not in KINDS or (failed and name == "mean_ms"):
            continue
        if text is None:  # a short row: csv fills missing cells with None
            raise BenchmarkValueError(
                f"{where}: the row has fewer cells than the header. Fix the row or "
                f"write the file again with BenchmarkResult.save."
            )
        values[name] = _cell(where, name, KINDS[name], text)
    if failed:
        values.update(mean_ms=math.nan, success=False)
    return _build(values, where)


def record_to_csv(data: Mapping[str, Any]) -> dict[str, str]:
    """One record dict (JSON-ready) as CSV cells: dicts and booleans as JSON."""
    cells = {}
    for name in CSV_COLUMNS:
        value = data.get(name)
        if value is None:
            cells[name] = ""
        elif isinstance(value, dict | bool):
            cells[name] = json.dumps(value)
        else:
            cells[name] = str(value) if not isinstance(value, float) else repr(value)
    return cells
