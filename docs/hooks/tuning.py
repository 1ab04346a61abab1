"""MkDocs hook: the measured table and plot of ``tuning.md``.

Both come from ``docs/data/cpu/tuning.json``, written by
``python benchmarks/bench_tuning.py --docs docs/data/cpu/tuning.json``; none of the
numbers is typed by hand. Markers in the page:

    <!-- tuning: summary -->   per primitive: the targets, the regrets and the flip
                               rate, then per shape the reason, the pick, pick /
                               fastest and default / fastest, idle and with the
                               other cores busy
    <!-- tuning: plot -->      a PNG: each backend's best median per shape (log-log),
                               dispatch's picks marked; lower is better

The PNG is rendered into the site (``assets/results/tuning.png``) by ``on_files``. A
missing file or an unknown marker fails the build.
"""

from __future__ import annotations

import re
from typing import Any

import hook_data
from hook_data import load_json, png_bytes
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

PAGE = "tuning.md"
PLOT = "assets/results/tuning.png"
DATA = "cpu/tuning.json"
MARKER = re.compile(r"<!-- tuning: (\w+) -->")


def _load() -> dict[str, Any]:
    return load_json(DATA, hook="tuning")


def _ratio(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}×"


def _regret(r: dict[str, Any] | None) -> str:
    if not r or r.get("median") is None:
        return "–"
    return f"{r['median']:+.0%} median, {r['worst']:+.0%} worst"


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}"


def _targets(name: str, s: dict[str, Any], pc: dict[str, Any]) -> list[str]:
    flips = s.get("flip_rate")
    return [
        f"**{name}**: the pick within 5% of the fastest on "
        f"{s['tuned_within']:.0%} of the tuned shapes (target ≥ 90%), within 15% "
        f"on {s['held_out_within']:.0%} of the held-out ones (target ≥ 80%); "
        f"slower than the untuned default beyond the spread on "
        f"{s.get('worse_than_default', '–')} shapes (target 0); winners that "
        f"changed between two independent tuning runs: "
        f"{'–' if flips is None else f'{flips:.0%}'} (target ≤ 10%; "
        f"{_share(s.get('costly_flips'))} of the shapes had winners more than 5% "
        f"apart); a tuned call "
        f"under `jit` costs {pc['ratio']:.3f}× the same choice made explicitly "
        f"(chained calls).",
        "",
        "| regret (time over the fastest, minus one) | idle | other cores busy |",
        "|---|---|---|",
        f"| dispatch's pick, tuned shapes | {_regret(s.get('regret_tuned'))} | "
        f"{_regret(s.get('regret_loaded'))} (all shapes) |",
        f"| dispatch's pick, held-out shapes | {_regret(s.get('regret_held_out'))} "
        f"| |",
        f"| the untuned default, all shapes | {_regret(s.get('default_regret'))} | "
        f"{_regret(s.get('default_regret_loaded'))} |",
        "",
    ]


def _summary() -> str:
    data = _load()
    machine = data.get("machine", {})
    lines = [
        f"Measured on {machine.get('cpu', 'an unknown CPU')}, "
        f"{machine.get('cores', '?')} cores ({machine.get('date', '')[:10]}).",
        "",
    ]
    for name, result in data["measured"].items():
        s = data["summary"][name]
        lines += _targets(name, s, result["per_call"])
        lines += [
            "| shape | held out | reason | dispatch's pick | pick / fastest | "
            "busy | default / fastest | busy |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in result["rows"]:
            case = r["case"].split(" ", 1)[1]
            lines.append(
                f"| `{case}` | {'yes' if r['held_out'] else ''} | {r['reason']} | "
                f"`{r['pick']}` | {_ratio(r.get('pick_ratio'))} | "
                f"{_ratio(r.get('pick_loaded'))} | "
                f"{_ratio(r.get('default_ratio'))} | "
                f"{_ratio(r.get('default_loaded'))} |"
            )
        lines.append("")
    return "\n".join(lines)


def _plot() -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = _load()
    names = list(data["measured"])
    fig, axes = plt.subplots(len(names), 1, figsize=(8, 4.2 * len(names)))
    axes = [axes] if len(names) == 1 else list(axes)
    for ax, name in zip(axes, names, strict=True):
        rows = data["measured"][name]["rows"]
        sizes = [int(r["case"].split("=")[1].split(",")[0]) for r in rows]
        backends = sorted({lab.split("(")[0] for r in rows for lab in r["candidates"]})
        for backend in backends:
            best = [
                min(
                    (
                        t
                        for lab, t in r["candidates"].items()
                        if lab.split("(")[0] == backend
                    ),
                    default=None,
                )
                for r in rows
            ]
            points = [(s, t * 1e6) for s, t in zip(sizes, best, strict=True) if t]
            ax.plot(*zip(*points, strict=True), marker=".", label=backend)
        picks = [
            (s, r["pick_s"] * 1e6)
            for s, r in zip(sizes, rows, strict=True)
            if r.get("pick_s")
        ]
        ax.plot(
            *zip(*picks, strict=True),
            "o",
            mfc="none",
            mec="black",
            ms=10,
            label="dispatch's pick",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        unit = "elements" if name == "scaled_add" else "rows"
        ax.set_xlabel(f"size ({unit})")
        ax.set_ylabel("median µs per call (lower is better)")
        ax.set_title(f"{name}: each backend's best parameters", fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    machine = data.get("machine", {})
    fig.suptitle(
        f"Measured on {machine.get('cpu', '?')} ({machine.get('cores', '?')} "
        f"cores); points: medians of interleaved rounds",
        fontsize=9,
    )
    fig.tight_layout()
    return png_bytes(fig)


def _replace(match: re.Match[str]) -> str:
    kind = match.group(1)
    if kind == "summary":
        return _summary()
    if kind == "plot":
        alt = "each backend's best median per shape, dispatch's picks circled"
        return f"[![{alt}]({PLOT})]({PLOT})"
    raise PluginError(f"tuning hook: unknown marker {match.group(0)!r} in {PAGE}")


def on_config(config: Any) -> Any:
    hook_data.set_docs_dir(config["docs_dir"])
    return config


def on_files(files: Any, config: Any) -> Any:
    files.append(File.generated(config, PLOT, content=_plot()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    return MARKER.sub(_replace, markdown)
