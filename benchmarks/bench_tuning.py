"""Measured dispatch, checked: does a tuned call run (nearly) the fastest candidate?

For the catalog's ``scaled_add`` and ``csrmv`` on the CPU, over 20 shapes spanning
10^2 … 10^6 elements (``scaled_add``) or rows (``csrmv``, 100 … 1 stored entries per
row, so 10^4 … 10^6 in all):

1. **tune, twice** (two fresh processes per primitive, each with a tuned table of
   its own): ``op.tune(contention=True)`` on 12 of the shapes, every usable backend
   and launch parameter, as the catalog's shipped tables are tuned. The share of
   keys whose winner differs between the two independent runs is the **flip rate**;
2. **measure** (another fresh process per primitive, reading the first run's
   table): every candidate timed again on all 20 shapes, as the tuner times
   (interleaved rounds, two passes, and one pass with the other cores busy; see
   ``polykernel.tuning.timing``), and for each shape the candidate dispatch picks
   (``op.dispatch``: ``exact`` on the 12 tuned shapes, ``nearest`` on the 8 held
   out) compared with the fastest. The comparison is the pick's time over the
   fastest's taken round by round (``polykernel.benchmark.paired``); its *regret*
   is that ratio minus one, idle and with the other cores busy, beside the untuned
   default's;
3. **per call**: a tuned call under ``jit`` (chained, 200 calls in one
   ``fori_loop``) against the same backend and parameters chosen explicitly, 31
   alternating pairs, compared pair by pair.

Targets (issues 28, 34): dispatch's pick within 5% of the fastest candidate (or
within that candidate's own spread, if larger) on >= 90% of the tuned shapes and
within 15% on >= 80% of the held-out ones; the pick never slower than the untuned
default beyond the measured spread; a flip rate <= 10%; a tuned call <= 1.02x the
explicit one.

Run: ``python benchmarks/bench_tuning.py [--quick] [--json out.json]
[--docs docs/data/cpu/tuning.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _env import cache_environment

HERE = Path(__file__).resolve().parent
N_SHAPES = 20
HELD_OUT = (1, 4, 6, 9, 11, 14, 16, 18)  # never an end of the range
PRIMITIVES = ("scaled_add", "csrmv")


def _environment(run_dir: Path) -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", NUMBA_THREADING_LAYER="omp")
    env.update(cache_environment(run_dir))
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE), env.get("PYTHONPATH")])
    )
    return env


def shapes(primitive: str) -> list[tuple[int, ...]]:
    """The 20 shapes: ``(n,)`` or ``(rows, nnz_per_row)``, log-spaced."""
    found = []
    for i in range(N_SHAPES):
        t = i / (N_SHAPES - 1)
        size = round(10 ** (2 + 4 * t))
        found.append(
            (size,)
            if primitive == "scaled_add"
            else (size, max(1, round(10 ** (2 - 2 * t))))
        )
    return found


def configs(primitive: str, indices: list[int]) -> list:
    import numpy as np

    from polykernel.benchmark import BenchmarkConfig
    from polykernel.catalog._support import random_csr

    rng = np.random.default_rng(0)
    made = []
    for i in indices:
        shape = shapes(primitive)[i]
        if primitive == "scaled_add":
            x, y = (rng.standard_normal(shape[0]).astype(np.float32) for _ in range(2))
            made.append(BenchmarkConfig(f"#{i} n={shape[0]}", (x, y), {"alpha": 2.0}))
            continue
        rows, per_row = shape
        data, indices_, indptr = random_csr(
            rows, rows, min(1.0, per_row / rows), seed=i
        )
        v = rng.standard_normal(rows).astype(np.float32)
        made.append(
            BenchmarkConfig(
                f"#{i} rows={rows},k={per_row}",
                (data, indices_, indptr, v),
                {"shape": (rows, rows)},
            )
        )
    return made


def _op(primitive: str):
    from polykernel import catalog
    from polykernel.dispatch import table

    # The experiment tunes from nothing: the catalog's shipped table (measured on
    # the benchmark data's shapes) would answer the held-out shapes otherwise.
    with table._lock:
        table._shipped[:] = [
            (name, path) for name, path in table._shipped
            if not (name or "").startswith("polykernel.catalog.")
        ]  # fmt: skip
    return getattr(catalog, f"{primitive}_p")


def phase_tune(quick: bool, names: list[str]) -> dict:
    tuned = [i for i in range(N_SHAPES) if i not in HELD_OUT]
    out = {}
    for name in names:
        op = _op(name)
        report = op.tune(
            platform="cpu",
            configs=configs(name, tuned),
            max_seconds=900,
            case_seconds=0.5 if quick else 1.5,
            contention=True,
        )
        ratios = {
            c.label: {
                m.candidate.label: m.ratio for m in c.measured if m.status == "ok"
            }
            for c in report.cases
        }
        # Every candidate as the ranking rule sees it, in the declared order (what
        # a study of the rule itself needs: see docs/tuning.md).
        default = op.get_default("cpu")
        first = {n: v[0] for n, v in op.tunables("cpu")[default]}
        scored = {c.label: _scored(c, _label(default, first)) for c in report.cases}
        out[name] = {"winners": report.winners(), "ratios": ratios, "scored": scored}
    return out


def _scored(case, default: str) -> list[dict]:
    return [
        {
            "label": m.candidate.label,
            "ratio": m.ratio,
            "error": m.ratio_error,
            "loaded": m.loaded_ratio,
            "default": m.candidate.label == default,
        }
        for m in case.measured
        if m.status == "ok"
    ]


def _per_call(op, cfg, decision) -> dict:
    """Chained calls: the tuned call (dispatch decides) vs the same choice explicit."""
    import time

    import jax

    from polykernel.tuning.capture import bound_calls

    (bound,) = bound_calls(
        lambda *a: op.call(*a, **cfg.kernel_kwargs), cfg.args, op.primitive
    )
    ins, outs, statics = bound.operands, bound.params["outs"], bound.statics
    first = (
        len(ins) - 1
    )  # the chained operand: the last input (x / v), same shape as out

    def chain(explicit: bool):
        extra = {"backend": decision.backend, **decision.params} if explicit else {}

        def body(_, carry):
            args = [*ins[:first], carry]
            return op.primitive.bind(
                *args, outs=outs, **statics, **{"backend": None, **extra}
            )[0]

        return jax.jit(lambda x: jax.lax.fori_loop(0, 200, body, x))

    fns = {"tuned": chain(False), "explicit": chain(True)}
    times = {k: [] for k in fns}
    x = ins[first]
    for f in fns.values():
        jax.block_until_ready(f(x))
    for rep in range(31):  # alternating, each pair in both orders
        for k in sorted(fns, reverse=rep % 2 == 1):
            t0 = time.perf_counter()
            jax.block_until_ready(fns[k](x))
            times[k].append((time.perf_counter() - t0) / 200)
    import statistics

    from polykernel.benchmark.paired import ratio_to

    med = {k: statistics.median(v) for k, v in times.items()}
    ratio, spread = ratio_to(times, "tuned", "explicit")
    return {
        "tuned_us": med["tuned"] * 1e6,
        "explicit_us": med["explicit"] * 1e6,
        # pair by pair (benchmark.paired): the machine's speed steps cancel
        "ratio": ratio,
        "ratio_spread": spread,
    }


def phase_measure(quick: bool, names: list[str]) -> dict:
    results = {}
    for name in names:
        op = _op(name)
        all_cfgs = configs(name, list(range(N_SHAPES)))
        report = op.tune(
            platform="cpu",
            configs=all_cfgs,
            save=False,
            max_seconds=1800,
            case_seconds=0.75 if quick else 2.0,
            contention=True,
        )
        rows = []
        for i, (cfg, case) in enumerate(zip(all_cfgs, report.cases, strict=True)):
            timed = {m.candidate.label: m for m in case.measured if m.status == "ok"}
            decision = op.dispatch(
                *_avals(op, cfg),
                outs=_outs(name, cfg),
                platform="cpu",
                **_statics(name, cfg),
            )
            pick = _label(decision.backend, decision.params)
            fastest = min(timed.values(), key=lambda m: m.ratio)
            default = _label(
                op.get_default("cpu"),
                {n: v[0] for n, v in op.tunables("cpu")[op.get_default("cpu")]},
            )
            chosen = timed.get(pick)
            base = timed.get(default)
            loaded_fastest = min(
                (m.loaded_ratio for m in timed.values() if m.loaded_ratio), default=None
            )
            rows.append(
                {
                    "index": i,
                    "case": cfg.label,
                    "held_out": i in HELD_OUT,
                    "reason": decision.reason,
                    "pick": pick,
                    "fastest": fastest.candidate.label,
                    "fastest_s": fastest.median_s,
                    "pick_s": chosen.median_s if chosen else None,
                    # the pick's time over the fastest's, round by round, and the
                    # spread of that ratio (benchmark.paired)
                    "pick_ratio": chosen.ratio if chosen else None,
                    "pick_spread": chosen.ratio_spread if chosen else None,
                    "pick_error": chosen.ratio_error if chosen else None,
                    "pick_loaded": _over(chosen, loaded_fastest),
                    "default": default,
                    "default_ratio": base.ratio if base else None,
                    "default_error": base.ratio_error if base else None,
                    "default_loaded": _over(base, loaded_fastest),
                    "candidates": {k: m.median_s for k, m in timed.items()},
                    "ratios": {k: m.ratio for k, m in timed.items()},
                }
            )
        middle = all_cfgs[len(all_cfgs) // 2]
        decision = op.dispatch(
            *_avals(op, middle),
            outs=_outs(name, middle),
            platform="cpu",
            **_statics(name, middle),
        )
        results[name] = {"rows": rows, "per_call": _per_call(op, middle, decision)}
    return results


def _over(measured, loaded_fastest):
    """A candidate's time with the other cores busy over the fastest's then."""
    if measured is None or not measured.loaded_ratio or not loaded_fastest:
        return None
    return measured.loaded_ratio / loaded_fastest


def _operands(op, cfg):
    from polykernel.tuning.capture import bound_calls

    (bound,) = bound_calls(
        lambda *a: op.call(*a, **cfg.kernel_kwargs), cfg.args, op.primitive
    )
    return bound.operands


def _avals(op, cfg):
    import jax

    return [jax.ShapeDtypeStruct(x.shape, x.dtype) for x in _operands(op, cfg)]


def _statics(name, cfg):
    if name == "csrmv":
        return {"shape": tuple(cfg.kernel_kwargs["shape"]), "transpose": False}
    return dict(cfg.kernel_kwargs)


def _outs(name, cfg):
    import jax

    n = cfg.args[0].shape[0] if name == "scaled_add" else cfg.kernel_kwargs["shape"][0]
    return [jax.ShapeDtypeStruct((n,), "float32")]


def _label(backend: str, params) -> str:
    items = sorted(dict(params).items())  # as the tuner's labels: names sorted
    return (
        backend
        if not items
        else f"{backend}({', '.join(f'{k}={v!r}' for k, v in items)})"
    )


def _regret(values: list) -> dict:
    """Median and worst of ``ratio - 1`` over the rows that have one."""
    known = sorted(v - 1 for v in values if v is not None)
    if not known:
        return {"median": None, "worst": None}
    return {"median": known[len(known) // 2], "worst": known[-1]}


def _never_worse(row: dict) -> bool:
    """The pick is not slower than the default beyond the measured spread."""
    from polykernel.dispatch.ranking import RESOLUTION

    pick, base = row["pick_ratio"], row["default_ratio"]
    if pick is None or base is None:
        return True
    margin = max(RESOLUTION, row["pick_error"] or 0.0, row["default_error"] or 0.0)
    return pick <= base * (1 + margin)


def flip_rate(first: dict, second: dict) -> float:
    """The share of keys (case labels) whose winner differs between two runs."""
    keys = sorted(set(first) & set(second))
    return sum(first[k] != second[k] for k in keys) / len(keys) if keys else 0.0


def costly_flips(first: dict, second: dict, rows: list) -> float:
    """The share of keys whose two winners differ by more than 5% in time, as the
    measure phase timed them (a flip between equals costs nothing)."""
    by_case = {r["case"]: r["ratios"] for r in rows}
    keys = sorted(set(first) & set(second) & set(by_case))
    costly = 0
    for k in keys:
        a, b = by_case[k].get(first[k]), by_case[k].get(second[k])
        if a and b and max(a, b) / min(a, b) > 1.05:
            costly += 1
    return costly / len(keys) if keys else 0.0


def summarize(measured: dict, tuned: dict | None = None) -> dict:
    summary = {}
    for name, result in measured.items():
        rows = result["rows"]
        for row in rows:
            allowed = max(
                0.05 if not row["held_out"] else 0.15, row["pick_spread"] or 0.0
            )
            row["ok"] = (
                row["pick_ratio"] is not None and row["pick_ratio"] <= 1 + allowed
            )
            row["never_worse"] = _never_worse(row)
        tuned_rows = [r for r in rows if not r["held_out"]]
        held = [r for r in rows if r["held_out"]]
        runs = (tuned or {}).get(name, {})
        summary[name] = {
            "tuned_within": sum(r["ok"] for r in tuned_rows) / len(tuned_rows),
            "held_out_within": sum(r["ok"] for r in held) / len(held),
            "per_call_ratio": result["per_call"]["ratio"],
            "regret_tuned": _regret([r["pick_ratio"] for r in tuned_rows]),
            "regret_held_out": _regret([r["pick_ratio"] for r in held]),
            "default_regret": _regret([r["default_ratio"] for r in rows]),
            "regret_loaded": _regret([r["pick_loaded"] for r in rows]),
            "default_regret_loaded": _regret([r["default_loaded"] for r in rows]),
            "worse_than_default": sum(not r["never_worse"] for r in rows),
            "flip_rate": (
                flip_rate(runs["first"], runs["second"]) if "second" in runs else None
            ),
            "costly_flips": (
                costly_flips(runs["first"], runs["second"], rows)
                if "second" in runs
                else None
            ),
        }
    return summary


def _pct(regret: dict) -> str:
    if regret["median"] is None:
        return "-"
    return f"{regret['median']:+.0%} / {regret['worst']:+.0%}"


def _print(measured: dict, summary: dict) -> None:
    for name, result in measured.items():
        print(
            f"\n{name}: time over the fastest (x), idle and with the other cores busy"
        )
        head = ("case", "reason", "pick", "x", "ok", "busy x", "default x", "busy x")
        form = "{:<22} {:<8} {:<26} {:>6} {:>3} {:>7} {:>9} {:>7}"
        print(form.format(*head))
        for r in result["rows"]:
            cells = (r["case"][:22], r["reason"][:8], r["pick"][:26],
                     _x(r["pick_ratio"]), "y" if r["ok"] else "N",
                     _x(r["pick_loaded"]), _x(r["default_ratio"]),
                     _x(r["default_loaded"]))  # fmt: skip
            print(form.format(*cells))
        pc = result["per_call"]
        s = summary[name]
        print(
            f"tuned shapes within 5%: {s['tuned_within']:.0%} (target >= 90%); "
            f"held-out within 15%: {s['held_out_within']:.0%} (target >= 80%)"
        )
        print(
            f"regret, median / worst: pick {_pct(s['regret_tuned'])} tuned, "
            f"{_pct(s['regret_held_out'])} held out; "
            f"default {_pct(s['default_regret'])}"
        )
        print(
            f"with the other cores busy: pick {_pct(s['regret_loaded'])}, default "
            f"{_pct(s['default_regret_loaded'])}; shapes where the pick is slower "
            f"than the default beyond the spread: {s['worse_than_default']} (target 0)"
        )
        flips, costly = s["flip_rate"], s["costly_flips"]
        print(
            "flip rate between two tuning runs: "
            + ("-" if flips is None else f"{flips:.0%}")
            + " (target <= 10%); winners more than 5% apart: "
            + ("-" if costly is None else f"{costly:.0%}")
        )
        print(
            f"per call under jit (chained): tuned {pc['tuned_us']:.2f} us, explicit "
            f"{pc['explicit_us']:.2f} us, ratio {pc['ratio']:.3f} (target <= 1.02)"
        )


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _run(phase: str, name: str, env: dict, quick: bool) -> dict:
    """One phase of one primitive in a fresh process; its RESULT line."""
    cmd = [sys.executable, __file__, "--phase", phase, "--primitive", name]
    cmd += ["--quick"] if quick else []
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-6000:], file=sys.stderr)
        raise SystemExit(1)
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])[name]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["tune", "measure"], help=argparse.SUPPRESS)
    parser.add_argument("--primitive", choices=PRIMITIVES, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="shorter timing budgets")
    parser.add_argument("--json", help="write the full results here")
    parser.add_argument("--docs", help="write the docs' data file here")
    args = parser.parse_args()
    if args.phase:
        sys.path.insert(0, str(HERE.parent / "src"))
        fn = phase_tune if args.phase == "tune" else phase_measure
        print("RESULT " + json.dumps(fn(args.quick, [args.primitive])))
        return 0
    run_dir = Path(tempfile.mkdtemp(prefix="polykernel-bench-tuning-"))
    env = _environment(run_dir)
    # The second tuning run writes a table of its own (its config directory): the
    # two runs are independent, as two users' `polykernel tune` are.
    second = {**env, "POLYKERNEL_CONFIG_DIR": str(run_dir / "config-second")}
    tuned: dict[str, dict] = {}
    measured: dict[str, dict] = {}
    # One fresh process per phase and primitive, as a user's `polykernel tune` and
    # a later program are: what one primitive's timing leaves in a process (thread
    # pools started from other threads, say) never reaches the other's.
    for name in PRIMITIVES:
        first_run = _run("tune", name, env, args.quick)
        second_run = _run("tune", name, second, args.quick)
        tuned[name] = {**first_run, "first": first_run["winners"],
                       "second": second_run["winners"],
                       "second_scored": second_run["scored"]}  # fmt: skip
        measured[name] = _run("measure", name, env, args.quick)
    summary = summarize(measured, tuned)
    _print(measured, summary)
    from polykernel.benchmark.machine import machine_info

    document = {
        "machine": machine_info(),
        "tuned_winners": {n: t["winners"] for n, t in tuned.items()},
        "second_winners": {n: t["second"] for n, t in tuned.items()},
        "tuned_ratios": {n: t["ratios"] for n, t in tuned.items()},
        "scored": {n: [t["scored"], t["second_scored"]] for n, t in tuned.items()},
        "measured": measured,
        "summary": summary,
        "held_out": list(HELD_OUT),
    }
    for target in filter(None, [args.json, args.docs]):
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        Path(target).write_text(json.dumps(document, indent=1) + "\n")
    met = all(
        s["tuned_within"] >= 0.9
        and s["held_out_within"] >= 0.8
        and s["per_call_ratio"] <= 1.02
        and s["worse_than_default"] == 0
        and (s["flip_rate"] or 0.0) <= 0.10
        for s in summary.values()
    )
    print("\ntargets " + ("met" if met else "NOT met"))
    return 0 if met else 2


if __name__ == "__main__":
    sys.exit(main())
