"""The PNGs of ``choosing-a-backend.md``: the demo's medians per primitive and data
set, and the GPU benchmark's cases (lower is better in both)."""

from __future__ import annotations

import results_data
from hook_data import load_json, png_bytes


def plot_demo() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = list(results_data.DATASETS)
    primitives = list(results_data.by_primitive(results_data.records_of("cpu")))
    every = [r for d in datasets for r in results_data.records_of(d)]
    backends = results_data.backend_order(every)
    colors = {b: plt.get_cmap("tab10")(i % 10) for i, b in enumerate(backends)}
    # One row per primitive, one column per data set: fits the page's width.
    fig, axes = plt.subplots(
        len(primitives),
        len(datasets),
        figsize=(4.4 * len(datasets), 3.4 * len(primitives)),
        squeeze=False,
    )
    for col, dataset in enumerate(datasets):
        groups = results_data.by_primitive(results_data.records_of(dataset))
        for row, primitive in enumerate(primitives):
            ax = axes[row][col]
            records = groups.get(primitive, [])
            ax.set_title(
                f"{primitive} — {results_data.DATASETS[dataset][2]}", fontsize=9
            )
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
            cases, names = (
                results_data.case_labels(records),
                results_data.backend_order(records),
            )
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
                    bad = not results_data.is_correct(r)
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
    return png_bytes(fig)


def plot_bench() -> bytes:
    """benchmarks/bench_gpu.py's four measures, 2 x 2 panels sized for the page's
    content width (about 700 px): each panel's axis names its unit and whether
    lower or higher is better; the title names the GPU it ran on."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load_json("gpu/bench_gpu.json")
    machine = load_json("gpu/machine.json")
    cases = [c for c in results_data.BENCH_CASES if c in data] + sorted(
        set(data) - set(results_data.BENCH_CASES)
    )
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
    return png_bytes(fig)
