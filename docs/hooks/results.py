"""MkDocs hook: the measured tables and plots of ``choosing-a-backend.md``.

Every number on that page comes from the results files under ``docs/data/``, read at
build time; none is typed by hand:

- ``cpu/demo-results.json`` and ``cpu/machine.json``: ``python -m polykernel.demo``
  (``make demo``) and the machine it ran on;
- ``gpu/demo-results.json``: the same on a GPU machine (``make demo-gpu``: GPU
  records, and CPU records of that machine's host); ``gpu/bench_gpu.json``:
  ``benchmarks/bench_gpu.py``; ``gpu/machine.json``: that machine, from the
  ``env.txt`` ``.ci/gpu-check`` wrote (``benchmarks/machine_from_env.py``).

The page holds markers, each replaced by generated Markdown::

    <!-- results: machine cpu|gpu -->       the machine a data set was measured on
    <!-- results: demo cpu|gpu-host|gpu -->  one table per primitive
    <!-- results: fastest -->               the fastest correct backend per case
    <!-- results: bench gpu -->             benchmarks/bench_gpu.py's cases
    <!-- results: plot demo|bench -->       a PNG rendered with matplotlib

The PNGs are rendered into the site (``assets/results/``) by ``on_files``. An unknown
marker, a missing file or a page without markers fails the build.
"""

from __future__ import annotations

import math
import re
from typing import Any

import hook_data
from hook_data import load_json
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File
from results_data import (
    BENCH_CASES,
    DATASETS,
    backend_order,
    by_primitive,
    case_labels,
    is_correct,
    records_of,
)
from results_plots import plot_bench, plot_demo

PAGE = "choosing-a-backend.md"
PLOTS = {"demo": "assets/results/demo.png", "bench": "assets/results/bench-gpu.png"}
MARKER = re.compile(r"<!-- results: ([\w-]+)(?: ([\w-]+))? -->")
NOISY = 0.10  # IQR above this fraction of the median: flagged, as the harness does


# -- formatting ----------------------------------------------------------------------


def _num(x: float | None, digits: int = 3) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    if x == 0:
        return "0"
    places = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    return f"{x:,.{places}f}"


def _rate(value: float | None, unit: str | None) -> str:
    if value is None or unit is None:
        return "—"
    if unit != "B/s":
        return f"{_num(value)} {unit}"
    for scale, prefix in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
        if value >= scale:
            return f"{_num(value / scale)} {prefix}"
    return f"{_num(value)} B/s"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _status(r: dict[str, Any]) -> str:
    if not r["success"]:
        return f"**failed**: {r.get('error') or 'error'}"
    if r.get("matches_reference") is False:
        return (
            f"**✗ differs from {r.get('reference_backend')}** "
            f"(max abs diff {_num(r.get('max_abs_diff'))})"
        )
    notes = []
    if r.get("matches_reference"):
        notes.append("matches")
    elif r["backend"] == r.get("reference_backend"):
        notes.append("reference")
    median, p25, p75 = r.get("median_ms"), r.get("p25_ms"), r.get("p75_ms")
    if median and p25 is not None and p75 is not None and p75 - p25 > NOISY * median:
        notes.append("noisy")
    return ", ".join(notes)


# -- the markers ---------------------------------------------------------------------


def _machine(which: str) -> str:
    m = load_json(f"{which}/machine.json")

    def text(value: Any) -> str:
        return "not recorded" if value in (None, "", []) else str(value)

    versions = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items() if v)
    rows = [
        ["CPU", text(m.get("cpu"))],
        ["logical CPUs", text(m.get("cores"))],
        [
            "GPUs seen by JAX",
            ", ".join(m["gpus"]) or "none" if "gpus" in m else "not recorded",
        ],
    ]
    rows += [
        [label, text(m[key])]
        for key, label in (("driver", "NVIDIA driver"), ("cuda", "CUDA (nvcc)"))
        if key in m
    ]
    rows += [
        ["OS", text(m.get("os"))],
        ["Python", text(m.get("python"))],
        ["packages", text(versions)],
        ["measured", text(m.get("date"))],
    ]
    if m.get("source"):
        rows.append(["recorded from", text(m["source"])])
    return _table(["", f"`docs/data/{which}/machine.json`"], rows)


def _demo(dataset: str) -> str:
    out = []
    for primitive, records in by_primitive(records_of(dataset)).items():
        ref = {r["label"]: r for r in records if r["backend"] == r["reference_backend"]}
        rows = []
        for case in case_labels(records):
            in_case = [r for r in records if r["label"] == case]
            fastest = min(
                (r for r in in_case if is_correct(r) and r.get("median_ms")),
                key=lambda r: r["median_ms"],
                default=None,
            )
            for backend in backend_order(in_case):
                r = next(r for r in in_case if r["backend"] == backend)
                base = ref.get(case, {}).get("median_ms")
                median = r.get("median_ms")
                speedup = base / median if base and median else None
                name = f"`{backend}`"
                rows.append(
                    [
                        case,
                        f"**{name}**" if r is fastest else name,
                        f"**{_num(median)}**" if r is fastest else _num(median),
                        "—" if speedup is None else f"{_num(speedup)}×",
                        _rate(r.get("throughput"), r.get("throughput_unit")),
                        _num(r.get("compile_ms"), 2),
                        _status(r),
                    ]
                )
        out.append(
            f"**`{primitive}`**\n\n"
            + _table(
                [
                    "case",
                    "backend",
                    "median ms",
                    "× reference",
                    "throughput",
                    "compile ms",
                    "check",
                ],
                rows,
            )
        )
    return "\n\n".join(out)


def _fastest() -> str:
    columns = list(DATASETS)
    found: dict[tuple[str, str], dict[str, str]] = {}
    for dataset in columns:
        for primitive, records in by_primitive(records_of(dataset)).items():
            for case in case_labels(records):
                in_case = [r for r in records if r["label"] == case]
                ref = next(
                    (r for r in in_case if r["backend"] == r["reference_backend"]), None
                )
                best = min(
                    (r for r in in_case if is_correct(r) and r.get("median_ms")),
                    key=lambda r: r["median_ms"],
                    default=None,
                )
                cell = "—"
                if best is not None:
                    cell = f"`{best['backend']}` {_num(best['median_ms'])} ms"
                    if ref and ref.get("median_ms") and best is not ref:
                        cell += f" ({_num(ref['median_ms'] / best['median_ms'])}×)"
                found.setdefault((primitive, case), {})[dataset] = cell
    rows = [
        [f"`{p}`", c] + [cells.get(d, "not measured") for d in columns]
        for (p, c), cells in found.items()
    ]
    return _table(["primitive", "case"] + [DATASETS[d][2] for d in columns], rows)


def _bench() -> str:
    data = load_json("gpu/bench_gpu.json")
    jnp_, floor = data.get("jnp.add", {}), data.get("ffi_floor", {})

    def ratio(a: float | None, b: float | None) -> str:
        return f"{_num(a / b)}×" if a and b else "—"

    rows = []
    for case in [c for c in BENCH_CASES if c in data] + sorted(
        set(data) - set(BENCH_CASES)
    ):
        d = data[case]
        cold = d.get("cold", {})
        rows.append(
            [
                f"`{case}`",
                _num(d.get("call_us")),
                ratio(d.get("call_us"), jnp_.get("call_us")),
                _num(d.get("chain_us")),
                ratio(d.get("chain_us"), floor.get("chain_us")),
                _num(d.get("chain_us_no_graphs")),
                _num(d.get("bandwidth_gbs"), 4),
                ratio(d.get("bandwidth_gbs"), jnp_.get("bandwidth_gbs")),
                _num(cold.get("first_call_s")),
                _num(cold.get("process_s")),
            ]
        )
    return _table(
        [
            "case",
            "call µs",
            "× jnp.add",
            "chain µs/call",
            "× ffi_floor",
            "chain µs/call, no CUDA graphs",
            "GB/s",
            "× jnp.add",
            "cold first call s",
            "cold process s",
        ],
        rows,
    )


def _plot_link(which: str) -> str:
    if which not in PLOTS:
        raise PluginError(f"results hook: no plot {which!r} (one of {sorted(PLOTS)})")
    alt = {
        "demo": "median ms per call of every backend, per primitive and case",
        "bench": "benchmarks/bench_gpu.py: per-call cost, chains, bandwidth",
    }
    # A link to the image itself: a click shows it at full size.
    return f"[![{alt[which]}]({PLOTS[which]})]({PLOTS[which]})"


def _replace(match: re.Match[str]) -> str:
    kind, arg = match.group(1), match.group(2)
    if kind == "machine" and arg in ("cpu", "gpu"):
        return _machine(arg)
    if kind == "demo" and arg in DATASETS:
        return _demo(arg)
    if kind == "fastest" and arg is None:
        return _fastest()
    if kind == "bench" and arg == "gpu":
        return _bench()
    if kind == "plot" and arg is not None:
        return _plot_link(arg)
    raise PluginError(f"results hook: unknown marker {match.group(0)!r} in {PAGE}")


# -- MkDocs events -------------------------------------------------------------------


def on_config(config: Any) -> Any:
    hook_data.set_docs_dir(config["docs_dir"])
    return config


def on_files(files: Any, config: Any) -> Any:
    for name, render in (("demo", plot_demo), ("bench", plot_bench)):
        files.append(File.generated(config, PLOTS[name], content=render()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if not MARKER.search(markdown):
        raise PluginError(f"results hook: {PAGE} has no results markers")
    return MARKER.sub(_replace, markdown)
