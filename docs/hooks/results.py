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

import io
import json
import math
import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

PAGE = "choosing-a-backend.md"
PLOTS = {"demo": "assets/results/demo.png", "bench": "assets/results/bench-gpu.png"}
MARKER = re.compile(r"<!-- results: ([\w-]+)(?: ([\w-]+))? -->")
NOISY = 0.10  # IQR above this fraction of the median: flagged, as the harness does
# Each data set: (results file, platform of its records, title, machine file).
DATASETS = {
    "cpu": ("cpu/demo-results.json", "cpu", "CPU (make demo)", "cpu"),
    "gpu-host": ("gpu/demo-results.json", "cpu", "CPU of the GPU machine", "gpu"),
    "gpu": ("gpu/demo-results.json", "gpu", "GPU (make demo-gpu)", "gpu"),
}
BENCH_CASES = ("jnp.add", "ffi_floor", "numba_cuda", "triton", "cuda_raw", "pallas")

_data_dir: Path | None = None


# -- reading -------------------------------------------------------------------------


def _load(name: str) -> Any:
    assert _data_dir is not None
    path = _data_dir / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise PluginError(f"results hook: cannot read {path}: {err}") from err


def _records(dataset: str) -> list[dict[str, Any]]:
    file, platform, _, _ = DATASETS[dataset]
    return [r for r in _load(file)["records"] if r["platform"] == platform]


def _short(primitive: str) -> str:
    return primitive.rsplit(".", 1)[-1]


def _by_primitive(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault(_short(r["primitive"]), []).append(r)
    return groups


def _cases(records: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["label"] for r in records))


def _backends(records: list[dict[str, Any]]) -> list[str]:
    """The reference first, then in the order the harness ran them."""
    names = list(dict.fromkeys(r["backend"] for r in records))
    refs = {r.get("reference_backend") for r in records}
    return sorted(names, key=lambda b: (b not in refs, names.index(b)))


def _correct(r: dict[str, Any]) -> bool:
    return bool(r["success"]) and r.get("matches_reference") is not False


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
    m = _load(f"{which}/machine.json")

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
    for primitive, records in _by_primitive(_records(dataset)).items():
        ref = {r["label"]: r for r in records if r["backend"] == r["reference_backend"]}
        rows = []
        for case in _cases(records):
            in_case = [r for r in records if r["label"] == case]
            fastest = min(
                (r for r in in_case if _correct(r) and r.get("median_ms")),
                key=lambda r: r["median_ms"],
                default=None,
            )
            for backend in _backends(in_case):
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
        for primitive, records in _by_primitive(_records(dataset)).items():
            for case in _cases(records):
                in_case = [r for r in records if r["label"] == case]
                ref = next(
                    (r for r in in_case if r["backend"] == r["reference_backend"]), None
                )
                best = min(
                    (r for r in in_case if _correct(r) and r.get("median_ms")),
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
    data = _load("gpu/bench_gpu.json")
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


# -- plots ---------------------------------------------------------------------------


def _plot_demo() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(DATASETS)
    primitives = list(_by_primitive(_records("cpu")))
    every = [r for d in datasets for r in _records(d)]
    backends = _backends(every)
    colors = {b: plt.get_cmap("tab10")(i % 10) for i, b in enumerate(backends)}
    # One row per primitive, one column per data set: fits the page's width.
    fig, axes = plt.subplots(
        len(primitives),
        len(datasets),
        figsize=(4.4 * len(datasets), 3.4 * len(primitives)),
        squeeze=False,
    )
    for col, dataset in enumerate(datasets):
        groups = _by_primitive(_records(dataset))
        for row, primitive in enumerate(primitives):
            ax = axes[row][col]
            records = groups.get(primitive, [])
            ax.set_title(f"{primitive} — {DATASETS[dataset][2]}", fontsize=9)
            if not records:
                ax.text(
                    0.5,
                    0.5,
                    "not measured",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                )
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            cases, names = _cases(records), _backends(records)
            width = 0.8 / len(names)
            for j, backend in enumerate(names):
                for i, case in enumerate(cases):
                    r = next(
                        (
                            r
                            for r in records
                            if r["label"] == case and r["backend"] == backend
                        ),
                        None,
                    )
                    if r is None or not r.get("median_ms"):
                        continue
                    bad = not _correct(r)
                    x = i - 0.4 + width * (j + 0.5)
                    ax.bar(
                        x,
                        r["median_ms"],
                        width,
                        color=colors[backend],
                        hatch="//" if bad else None,
                        edgecolor="red" if bad else "none",
                    )
                    if bad:
                        ax.annotate(
                            "mismatch",
                            (x, r["median_ms"]),
                            fontsize=7,
                            color="red",
                            ha="center",
                            va="bottom",
                        )
            ax.set_yscale("log")
            medians = [r["median_ms"] for r in records if r.get("median_ms")]
            if medians:  # room below the smallest bar: heights stay comparable
                ax.set_ylim(min(medians) / 4, max(medians) * 2)
            ax.set_xticks(range(len(cases)))
            ax.set_xticklabels(cases, rotation=20, ha="right", fontsize=7)
            ax.tick_params(axis="y", labelsize=7)
            if col == 0:
                ax.set_ylabel("median ms per call (log), lower is better", fontsize=8)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[b]) for b in backends]
    fig.legend(handles, backends, loc="upper center", ncol=len(backends), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    return _png(fig)


def _plot_bench() -> bytes:
    """benchmarks/bench_gpu.py's four measures, 2 x 2 panels sized for the page's
    content width (about 700 px): each panel's axis names its unit and whether
    lower or higher is better; the title names the GPU it ran on."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = _load("gpu/bench_gpu.json")
    machine = _load("gpu/machine.json")
    cases = [c for c in BENCH_CASES if c in data] + sorted(set(data) - set(BENCH_CASES))
    # (title, y axis label, series (key, legend label))
    panels = [
        (
            "one jitted call at N = 1",
            "µs per call, lower is better",
            [("call_us", None)],
        ),
        (
            "100 calls chained in one jit",
            "µs per call, lower is better",
            [("chain_us", "CUDA graphs"), ("chain_us_no_graphs", "no CUDA graphs")],
        ),
        (
            "bandwidth at 2^24 floats",
            "GB/s, higher is better",
            [("bandwidth_gbs", None)],
        ),
        (
            "cold start, fresh process",
            "seconds, lower is better",
            [("first_call_s", "first call"), ("process_s", "whole process")],
        ),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(7.6, 7.4), layout="constrained")
    for ax, (title, ylabel, series) in zip(axes.flat, panels, strict=True):
        width, top = 0.8 / len(series), 0.0
        for k, (key, label) in enumerate(series):
            values = [
                (data[c].get("cold", {}) if key.endswith("_s") else data[c]).get(key)
                or 0.0
                for c in cases
            ]
            xs = [i - 0.4 + width * (k + 0.5) for i in range(len(cases))]
            ax.bar(xs, values, width, label=label)
            top = max([top, *values])
        if any(label for _, label in series):
            ax.legend(fontsize=8, frameon=False, loc="upper left", ncol=2)
            ax.set_ylim(0, top * 1.25 or 1.0)  # room for the legend above the bars
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_xticks(range(len(cases)))
        ax.set_xticklabels(cases, rotation=35, ha="right", fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
    gpu = ", ".join(machine.get("gpus") or []) or "GPU not recorded"
    fig.suptitle(
        f"benchmarks/bench_gpu.py on {gpu}\n(medians of interleaved runs; "
        "cold start: one fresh process each)",
        fontsize=10,
    )
    return _png(fig)


def _png(fig: Any) -> bytes:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    # No timestamp or software tag: the same data renders the same bytes.
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


# -- MkDocs events -------------------------------------------------------------------


def on_config(config: Any) -> Any:
    global _data_dir
    _data_dir = Path(config["docs_dir"]) / "data"
    return config


def on_files(files: Any, config: Any) -> Any:
    for name, render in (("demo", _plot_demo), ("bench", _plot_bench)):
        files.append(File.generated(config, PLOTS[name], content=render()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if not MARKER.search(markdown):
        raise PluginError(f"results hook: {PAGE} has no results markers")
    return MARKER.sub(_replace, markdown)
