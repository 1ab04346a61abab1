"""Save and load a ``BenchmarkResult`` as JSON or CSV (format from the suffix).

Keyword-argument dicts are stored as JSON; values JSON cannot hold (dtypes, shapes
of odd types) are stored as their ``str``. Pickle is deliberately not offered: a
results file should be safe to open from anyone.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .record import BenchmarkRecord

if TYPE_CHECKING:
    from .result import BenchmarkResult

__all__ = ["load_result", "result_to_dict", "save_result"]

FORMAT_TAG = "polykernel.benchmark"
FORMAT_VERSION = 1
_FORMATS = ("json", "csv")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


def result_to_dict(result: BenchmarkResult) -> dict[str, Any]:
    """Return ``result`` as a JSON-ready dict."""
    records = [r.to_dict() for r in result.records]
    return json.loads(
        json.dumps(
            {
                "format": FORMAT_TAG,
                "version": FORMAT_VERSION,
                "primitive_name": result.primitive_name,
                "records": records,
            },
            default=_jsonable,
        )
    )


def _format(path: Path, format: str | None) -> str:
    fmt = (format or path.suffix.lstrip(".")).lower()
    if fmt not in _FORMATS:
        raise ValueError(
            f"BenchmarkResult: cannot tell the file format of '{path}' "
            f"(got {fmt or 'no suffix'!r}); use a .json or .csv suffix or pass "
            "format='json' or 'csv'."
        )
    return fmt


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _to_csv(data: dict[str, Any]) -> str:
    names = [f.name for f in fields(BenchmarkRecord)]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for rec in data["records"]:
        row = {}
        for k in names:
            v = rec.get(k)
            row[k] = json.dumps(v) if isinstance(v, dict | bool) else v
            row[k] = "" if v is None else row[k]
        writer.writerow(row)
    return buf.getvalue()


def save_result(
    result: BenchmarkResult, path: str | Path, format: str | None = None
) -> Path:
    """Write ``result`` to ``path`` (atomically) and return the path.

    Raises:
        ValueError: the format is neither JSON nor CSV.

    Example:
        >>> save_result(result, "bench.json")  # doctest: +SKIP
    """
    path = Path(path)
    fmt = _format(path, format)
    data = result_to_dict(result)
    text = json.dumps(data, indent=2) + "\n" if fmt == "json" else _to_csv(data)
    _atomic_write(path, text)
    return path


def _parse_cell(text: str, annotation: str) -> Any:
    if text == "":
        return {} if annotation.startswith("dict") else None
    if annotation.startswith("dict") or annotation.startswith("bool"):
        return json.loads(text)
    if annotation.startswith("float"):
        return float(text)
    if annotation.startswith("int"):
        return int(text)
    return text


def _from_csv(text: str, path: Path) -> list[BenchmarkRecord]:
    kinds = {f.name: str(f.type) for f in fields(BenchmarkRecord)}
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    missing = {"platform", "backend", "label"} - set(rows[0] if rows else kinds)
    if missing:
        raise ValueError(
            f"BenchmarkResult.load: '{path}' is not a polykernel benchmark CSV "
            f"(missing columns {sorted(missing)})."
        )
    return [
        BenchmarkRecord(
            **{k: _parse_cell(v, kinds[k]) for k, v in row.items() if k in kinds}
        )
        for row in rows
    ]


def load_result(path: str | Path, format: str | None = None) -> BenchmarkResult:
    """Read a result written by :func:`save_result`.

    Raises:
        ValueError: unknown format, or the file is not a polykernel result.

    Example:
        >>> BenchmarkResult.load("bench.json")  # doctest: +SKIP
    """
    from .result import BenchmarkResult

    path = Path(path)
    fmt = _format(path, format)
    text = path.read_text(encoding="utf-8")
    if fmt == "csv":
        records = _from_csv(text, path)
        names = {r.primitive for r in records}
        return BenchmarkResult(
            records, primitive_name=names.pop() if len(names) == 1 else ""
        )
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ValueError(
            f"BenchmarkResult.load: '{path}' is not valid JSON ({err})."
        ) from err
    if not isinstance(data, dict) or data.get("format") != FORMAT_TAG:
        raise ValueError(
            f"BenchmarkResult.load: '{path}' is not a polykernel benchmark file "
            f"(expected a JSON object with format={FORMAT_TAG!r})."
        )
    records = [BenchmarkRecord.from_dict(r) for r in data.get("records", [])]
    return BenchmarkResult(records, primitive_name=data.get("primitive_name", ""))
