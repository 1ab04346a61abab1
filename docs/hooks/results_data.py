"""The records behind ``choosing-a-backend.md``: which file holds each data set,
and the groupings the tables and plots share."""

from __future__ import annotations

from typing import Any

from hook_data import load_json

# Each data set: (results file, platform of its records, title, machine file).
DATASETS = {
    "cpu": ("cpu/demo-results.json", "cpu", "CPU (make demo)", "cpu"),
    "gpu-host": ("gpu/demo-results.json", "cpu", "CPU of the GPU machine", "gpu"),
    "gpu": ("gpu/demo-results.json", "gpu", "GPU (make demo-gpu)", "gpu"),
}
BENCH_CASES = ("jnp.add", "ffi_floor", "numba_cuda", "triton", "cuda_raw", "pallas")


def records_of(dataset: str) -> list[dict[str, Any]]:
    file, platform, _, _ = DATASETS[dataset]
    return [r for r in load_json(file)["records"] if r["platform"] == platform]


def short_name(primitive: str) -> str:
    return primitive.rsplit(".", 1)[-1]


def by_primitive(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(short_name(r["primitive"]), []).append(r)
    return groups


def case_labels(records: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["label"] for r in records))


def backend_order(records: list[dict[str, Any]]) -> list[str]:
    """The reference first, then in the order the harness ran them."""
    names = list(dict.fromkeys(r["backend"] for r in records))
    refs = {r.get("reference_backend") for r in records}
    return sorted(names, key=lambda b: (b not in refs, names.index(b)))


def is_correct(r: dict[str, Any]) -> bool:
    return bool(r["success"]) and r.get("matches_reference") is not False
