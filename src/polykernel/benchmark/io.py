"""Results on disk: JSON, CSV or pickle, written atomically, read with checks.

Functions take and return records plus the primitive name, never a
``BenchmarkResult``, so this module sits below the result class. JSON keeps the
reference's layout (``primitive_name``, ``records`` with its eleven fields first)
plus our fields and a format tag, then — when known — ``machine`` and ``load`` (what
the run measured on and under which load); files without the tag (the reference's)
or without the machine (older ones) load too.
Pickle is offered because the reference offers it: unpickling runs code stored in
the file, so only load pickle files from a trusted source.
"""

from __future__ import annotations

import csv
import io
import json
import os
import pickle
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import BenchmarkFileNotFoundError, BenchmarkValueError
from .record import BenchmarkRecord
from .recordio import (
    CSV_COLUMNS,
    REQUIRED,
    record_from_csv_row,
    record_from_json,
    record_to_csv,
)

__all__ = [
    "FORMATS",
    "load_pickle",
    "load_records",
    "records_to_dict",
    "resolve_format",
    "save_pickle",
    "save_records",
]

FORMAT_TAG = "polykernel.benchmark"
FORMAT_VERSION = 1
FORMATS = ("json", "csv", "pkl")
# What a JSON file may say about its run besides the records (dicts, optional).
ENVIRONMENT_KEYS = ("machine", "load")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    return str(value)


def records_to_dict(
    records: Sequence[BenchmarkRecord],
    name: str,
    environment: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON-ready dict of a result: the reference's keys first, then ours.

    Keyword values JSON cannot hold become lists (tuples) or their ``str``;
    ``environment``'s ``machine`` and ``load`` become top-level keys.
    """
    data: dict[str, Any] = {
        "primitive_name": name,
        "records": [r.to_dict() for r in records],
        "format": FORMAT_TAG,
        "version": FORMAT_VERSION,
    }
    for key in ENVIRONMENT_KEYS:
        if environment and environment.get(key) is not None:
            data[key] = environment[key]
    return json.loads(json.dumps(data, default=_jsonable))


def resolve_format(path: Path, format: str | None, where: str) -> str:
    """``format`` if given (checked), else from the suffix; JSON when it says none."""
    if format is None:
        suffix = path.suffix.lower().lstrip(".")
        return suffix if suffix in FORMATS else "json"
    if not isinstance(format, str) or format.lower() not in FORMATS:
        raise BenchmarkValueError(
            f"{where}: unsupported format {format!r} for '{path}'; choose one of "
            f"{', '.join(repr(f) for f in FORMATS)}."
        )
    return format.lower()


def _atomic_write(path: Path, payload: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _to_csv(data: dict[str, Any]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(record_to_csv(rec) for rec in data["records"])
    return buf.getvalue()


def save_records(
    records: Sequence[BenchmarkRecord],
    name: str,
    path: Path,
    fmt: str,
    environment: dict[str, Any] | None = None,
) -> None:
    """Write ``records`` as ``fmt`` (``'json'`` or ``'csv'``) to ``path``; JSON
    also keeps ``environment`` (CSV has no place for it)."""
    data = records_to_dict(records, name, environment)
    text = json.dumps(data, indent=2) + "\n" if fmt == "json" else _to_csv(data)
    _atomic_write(path, text.encode("utf-8"))


def save_pickle(obj: Any, path: Path) -> None:
    """Pickle ``obj`` to ``path`` (atomically)."""
    _atomic_write(path, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def _read(path: Path, where: str, binary: bool = False) -> Any:
    if not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise BenchmarkFileNotFoundError(
            f"{where}: '{path}' {what}. Pass the path BenchmarkResult.save wrote."
        )
    try:
        data = path.read_bytes() if binary else path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise BenchmarkValueError(
            f"{where}: '{path}' is not a UTF-8 text file ({err.reason} at byte "
            f"{err.start}); a .pkl file is read as pickle, other suffixes as JSON "
            "unless format= says otherwise."
        ) from err
    empty = not data if binary else not data.strip()
    if empty:
        raise BenchmarkValueError(
            f"{where}: '{path}' is empty; it holds no benchmark result."
        )
    return data


def load_pickle(path: Path, where: str) -> Any:
    """Unpickle ``path``. Only for trusted files: unpickling can run code."""
    try:
        return pickle.loads(_read(path, where, binary=True))
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as err:
        raise BenchmarkValueError(
            f"{where}: '{path}' is not a readable pickle ({type(err).__name__}: {err})."
        ) from err


def _from_json(text: str, path: Path, where: str) -> tuple[list, str, dict | None]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:  # RecursionError: absurd nesting
        raise BenchmarkValueError(
            f"{where}: '{path}' is not valid JSON ({err})."
        ) from err
    if not isinstance(data, dict) or data.get("format", FORMAT_TAG) != FORMAT_TAG:
        raise BenchmarkValueError(
            f"{where}: '{path}' is not a benchmark result file (expected a JSON "
            "object with 'primitive_name' and a list of 'records')."
        )
    if data.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise BenchmarkValueError(
            f"{where}: '{path}' has format version {data['version']!r}; this "
            f"polykernel reads version {FORMAT_VERSION}. Upgrade polykernel."
        )
    records = data.get("records")
    if not isinstance(records, list):
        raise BenchmarkValueError(
            f"{where}: '{path}', field 'records': expected a list of records, got "
            f"{records!r} ({type(records).__name__})."
        )
    name = data.get("primitive_name", "")
    if not isinstance(name, str):
        raise BenchmarkValueError(
            f"{where}: '{path}', field 'primitive_name': expected a string, got "
            f"{name!r}."
        )
    recs = [
        record_from_json(r, f"{where}: '{path}', record {i}")
        for i, r in enumerate(records)
    ]
    return recs, name, _environment(data, path, where)


def _environment(data: dict[str, Any], path: Path, where: str) -> dict | None:
    found = {k: data[k] for k in ENVIRONMENT_KEYS if data.get(k) is not None}
    for key, value in found.items():
        if not isinstance(value, dict):
            raise BenchmarkValueError(
                f"{where}: '{path}', field {key!r}: expected an object, got "
                f"{value!r} ({type(value).__name__})."
            )
    return found or None


def _from_csv(text: str, path: Path, where: str) -> tuple[list, str, None]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise BenchmarkValueError(
            f"{where}: '{path}' is not a benchmark result CSV (missing columns "
            f"{missing}; found {header})."
        )
    records = [
        record_from_csv_row(row, f"{where}: '{path}', line {reader.line_num}")
        for row in reader
    ]
    names = {r.primitive for r in records}
    return records, names.pop() if len(names) == 1 else "", None


def load_records(
    path: Path, fmt: str, where: str
) -> tuple[list[BenchmarkRecord], str, dict[str, Any] | None]:
    """Read ``(records, primitive_name, environment)`` from a JSON or CSV results
    file; ``environment`` (``machine``, ``load``) is None where the file has none."""
    text = _read(path, where)
    if fmt == "csv":
        return _from_csv(text, path, where)
    return _from_json(text, path, where)
