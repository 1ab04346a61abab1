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

On a CUDA GPU (``--platform gpu``) the same experiment runs with the children
given ``JAX_PLATFORMS=cuda,cpu`` (the GPU is their default device), without the
contention pass (busy cores are a CPU matter: those columns read n/a).

``--budget SECONDS`` bounds the whole run: a phase starts only when the time left
is enough for it, the tuner of each phase gets what is left as its
``max_seconds``, a child still running at the budget's end is stopped, and what was
measured is printed (and written, after every phase, to ``--json``) marked
partial. Under a budget each primitive runs tune, measure, then the second tune
(the flip rate), so the measurement comes before the check of it: the first two
share the time left by the shapes they time, the second tune gets what they
leave, and a primitive starts only when the one before it is done.

Run: ``python benchmarks/bench_tuning.py [--quick] [--platform cpu|gpu]
[--primitives scaled_add csrmv] [--budget SECONDS] [--json out.json]
[--docs docs/data/cpu/tuning.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from _env import cache_environment, run_directory

HERE = Path(__file__).resolve().parent
N_SHAPES = 20
HELD_OUT = (1, 4, 6, 9, 11, 14, 16, 18)  # never an end of the range
PRIMITIVES = ("scaled_add", "csrmv")
PLATFORMS = ("cpu", "gpu")
#: What the children's JAX_PLATFORMS is per platform: the first is their default
#: device (JAX gives the first listed platform the highest priority).
JAX_PLATFORMS = {"cpu": "cpu", "gpu": "cuda,cpu"}
#: ``case_seconds`` of the tune and the measure phase: by platform, then quick.
CASE_SECONDS = {
    "cpu": {False: (1.5, 2.0), True: (0.5, 0.75)},
    # A GPU's timings are steadier; the first three rounds of a pass (every
    # candidate, 14 ms each) come on top of case_seconds anyway.
    "gpu": {False: (1.5, 2.0), True: (0.3, 0.3)},
}
#: The tuner's max_seconds per phase without a budget.
MAX_SECONDS = {"tune": 900.0, "measure": 1800.0}
#: A child's exit status when the platform asked for has no device.
NO_DEVICE = 3
# Under --budget: seconds kept for the summary at the end; a phase's start-up and
# teardown before one was timed (imports, the device, compiling, per call); the
# least tuner time a phase is started for; how the time left is shared between a
# primitive's first tuning run and its measurement (by the shapes each times).
RESERVE_S = 5.0
OVERHEAD_GUESS_S = {"cpu": 10.0, "gpu": 20.0}
PER_CALL_GUESS_S = 5.0
MIN_TUNE_S = 10.0
# The tuner lets a first call in flight finish (a cold compile: seconds): a phase
# gets this share of its share as max_seconds.
SLACK = 0.85
WEIGHT = {"tune": N_SHAPES - len(HELD_OUT), "measure": N_SHAPES}
# Seconds spent inside op.tune() in this (child) process, by primitive.
_TUNE_SECONDS: dict[str, float] = {}


def _environment(run_dir: Path, platform: str = "cpu") -> dict[str, str]:
    env = dict(
        os.environ, JAX_PLATFORMS=JAX_PLATFORMS[platform], NUMBA_THREADING_LAYER="omp"
    )
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


def phase_tune(
    quick: bool,
    names: list[str],
    platform: str = "cpu",
    max_seconds: float | None = None,
) -> dict:
    tuned = [i for i in range(N_SHAPES) if i not in HELD_OUT]
    out = {}
    for name in names:
        op = _op(name)
        started = time.perf_counter()
        report = op.tune(
            platform=platform,
            configs=configs(name, tuned),
            max_seconds=max_seconds or MAX_SECONDS["tune"],
            case_seconds=CASE_SECONDS[platform][quick][0],
            contention=platform == "cpu",  # busy cores: a CPU matter
        )
        _TUNE_SECONDS[name] = time.perf_counter() - started
        ratios = {
            c.label: {
                m.candidate.label: m.ratio for m in c.measured if m.status == "ok"
            }
            for c in report.cases
        }
        # Every candidate as the ranking rule sees it, in the declared order (what
        # a study of the rule itself needs: see docs/tuning.md).
        default = op.get_default(platform)
        first = {n: v[0] for n, v in op.tunables(platform)[default]}
        scored = {c.label: _scored(c, _label(default, first)) for c in report.cases}
        out[name] = {"winners": report.winners(), "ratios": ratios, "scored": scored}
        if report.cut:  # only then: what max_seconds (the budget) left out
            out[name]["cut"] = list(report.cut)
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


def _per_call(op, cfg, decision, platform: str = "cpu") -> dict:
    """Chained calls: the tuned call (dispatch decides) vs the same choice explicit."""
    import jax

    from polykernel.tuning.capture import bound_calls

    (bound,) = bound_calls(
        lambda *a: op.call(*a, **cfg.kernel_kwargs), cfg.args, op.primitive
    )
    ins, outs, statics = bound.operands, bound.params["outs"], bound.statics
    if platform != "cpu":  # every operand on the device, before anything is jitted
        device = jax.devices(platform)[0]
        ins = tuple(jax.block_until_ready(jax.device_put(a, device)) for a in ins)
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


def phase_measure(
    quick: bool,
    names: list[str],
    platform: str = "cpu",
    max_seconds: float | None = None,
) -> dict:
    results = {}
    for name in names:
        op = _op(name)
        all_cfgs = configs(name, list(range(N_SHAPES)))
        started = time.perf_counter()
        report = op.tune(
            platform=platform,
            configs=all_cfgs,
            save=False,
            max_seconds=max_seconds or MAX_SECONDS["measure"],
            case_seconds=CASE_SECONDS[platform][quick][1],
            contention=platform == "cpu",  # busy cores: a CPU matter
        )
        _TUNE_SECONDS[name] = time.perf_counter() - started
        # A case the tuner's max_seconds cut before it was captured is not in the
        # report; one cut before any candidate was timed has nothing timed.
        cases = {case.label: case for case in report.cases}
        rows, missing = [], []
        for i, cfg in enumerate(all_cfgs):
            case = cases.get(cfg.label)
            timed = {
                m.candidate.label: m
                for m in (case.measured if case is not None else ())
                if m.status == "ok"
            }
            if not timed:
                missing.append(cfg.label)
                continue
            decision = op.dispatch(
                *_avals(op, cfg),
                outs=_outs(name, cfg),
                platform=platform,
                **_statics(name, cfg),
            )
            pick = _label(decision.backend, decision.params)
            fastest = min(timed.values(), key=lambda m: m.ratio)
            default = _label(
                op.get_default(platform),
                {n: v[0] for n, v in op.tunables(platform)[op.get_default(platform)]},
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
            platform=platform,
            **_statics(name, middle),
        )
        results[name] = {
            "rows": rows,
            "per_call": _per_call(op, middle, decision, platform),
        }
        if missing:  # only then: a full run's results are as they always were
            results[name]["not_measured"] = missing
        if report.cut:
            results[name]["cut"] = list(report.cut)
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


def _share(rows: list) -> float | None:
    """The share of ``rows`` within their target (None: none measured)."""
    return sum(r["ok"] for r in rows) / len(rows) if rows else None


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
        flips = "first" in runs and "second" in runs
        summary[name] = {
            "tuned_within": _share(tuned_rows),
            "held_out_within": _share(held),
            "per_call_ratio": result["per_call"]["ratio"],
            "regret_tuned": _regret([r["pick_ratio"] for r in tuned_rows]),
            "regret_held_out": _regret([r["pick_ratio"] for r in held]),
            "default_regret": _regret([r["default_ratio"] for r in rows]),
            "regret_loaded": _regret([r["pick_loaded"] for r in rows]),
            "default_regret_loaded": _regret([r["default_loaded"] for r in rows]),
            "worse_than_default": sum(not r["never_worse"] for r in rows),
            "flip_rate": flip_rate(runs["first"], runs["second"]) if flips else None,
            "costly_flips": (
                costly_flips(runs["first"], runs["second"], rows) if flips else None
            ),
        }
    return summary


def _pct(regret: dict) -> str:
    if regret["median"] is None:
        return "-"
    return f"{regret['median']:+.0%} / {regret['worst']:+.0%}"


def _of(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def _print(measured: dict, summary: dict, platform: str = "cpu") -> None:
    busy = platform == "cpu"  # the contention pass: the CPU's other cores busy
    for name, result in measured.items():
        print(
            f"\n{name}: time over the fastest (x)"
            + (", idle and with the other cores busy" if busy else "")
        )
        if busy:
            head = ("case", "reason", "pick", "x", "ok", "busy x", "default x",
                    "busy x")  # fmt: skip
            form = "{:<22} {:<8} {:<26} {:>6} {:>3} {:>7} {:>9} {:>7}"
        else:  # GPU labels are longer: triton(BLOCK=1024, num_warps=4)
            head = ("case", "reason", "pick", "x", "ok", "default x")
            form = "{:<22} {:<8} {:<34} {:>6} {:>3} {:>9}"
        print(form.format(*head))
        for r in result["rows"]:
            cells = (r["case"][:22], r["reason"][:8], r["pick"][:34 - 8 * busy],
                     _x(r["pick_ratio"]), "y" if r["ok"] else "N",
                     _x(r["pick_loaded"]), _x(r["default_ratio"]),
                     _x(r["default_loaded"]))  # fmt: skip
            print(form.format(*(cells if busy else (*cells[:5], cells[6]))))
        if result.get("not_measured"):
            print(
                f"not measured (max_seconds, the budget): "
                f"{len(result['not_measured'])} of {N_SHAPES} shapes"
            )
        pc = result["per_call"]
        s = summary[name]
        print(
            f"tuned shapes within 5%: {_of(s['tuned_within'])} (target >= 90%); "
            f"held-out within 15%: {_of(s['held_out_within'])} (target >= 80%)"
        )
        print(
            f"regret, median / worst: pick {_pct(s['regret_tuned'])} tuned, "
            f"{_pct(s['regret_held_out'])} held out; "
            f"default {_pct(s['default_regret'])}"
        )
        if busy:
            print(
                f"with the other cores busy: pick {_pct(s['regret_loaded'])}, "
                f"default {_pct(s['default_regret_loaded'])}; shapes where the pick "
                f"is slower than the default beyond the spread: "
                f"{s['worse_than_default']} (target 0)"
            )
        else:
            print(
                f"shapes where the pick is slower than the default beyond the "
                f"spread: {s['worse_than_default']} (target 0); with the other "
                f"cores busy: n/a on {platform}"
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


class _Failed(Exception):
    """A phase's child failed (or, ``stopped``, ran past the budget)."""

    def __init__(self, message: str, *, stopped: bool = False, fatal: bool = False):
        super().__init__(message)
        self.stopped, self.fatal = stopped, fatal


def _bounded(cmd: list[str], env: dict, timeout: float) -> tuple[str, str, int]:
    """Run ``cmd``; past ``timeout`` seconds stop it and what it started (its own
    process group: the contention pass's spinning processes included)."""
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=max(1.0, timeout))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        stopped = f"stopped after {timeout:.0f} s (the budget)"
        raise _Failed(stopped, stopped=True) from None
    return stdout, stderr, proc.returncode


def _run(
    phase: str,
    name: str,
    env: dict,
    quick: bool,
    platform: str = "cpu",
    max_seconds: float | None = None,
    timeout: float | None = None,
) -> tuple[dict, dict]:
    """One phase of one primitive in a fresh process: its RESULT and INFO lines."""
    cmd = [sys.executable, __file__, "--phase", phase, "--primitive", name]
    cmd += ["--quick"] if quick else []
    cmd += ["--platform", platform]
    cmd += [] if max_seconds is None else ["--max-seconds", f"{max_seconds:.1f}"]
    if timeout is None:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    else:
        stdout, stderr, code = _bounded(cmd, env, timeout)
    if code == NO_DEVICE:  # said in one line: no traceback to read
        said = [ln for ln in stderr.splitlines() if ln.startswith("bench_tuning:")]
        raise _Failed(said[-1] if said else stderr[-2000:], fatal=True)
    lines = dict(
        ln.split(" ", 1)
        for ln in stdout.splitlines()
        if ln.startswith(("RESULT ", "INFO "))
    )
    if code or "RESULT" not in lines:
        print(stdout[-3000:], stderr[-6000:], file=sys.stderr)
        raise _Failed(f"exit status {code}" if code else "no RESULT line")
    return json.loads(lines["RESULT"])[name], json.loads(lines.get("INFO", "{}"))


class _Driver:
    """The phases of a run, under an optional time budget, and what they gave."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.platform = args, args.platform
        self.started = time.perf_counter()
        self.deadline = None if args.budget is None else self.started + args.budget
        self.talk = args.budget is not None or self.platform != "cpu"
        # a phase's seconds outside op.tune(), by phase (guessed until one ran)
        guess = OVERHEAD_GUESS_S[self.platform]
        self.overhead = {"tune": guess, "measure": guess + PER_CALL_GUESS_S}
        self.seen: set[str] = set()
        self.log: list[dict] = []
        self.info: dict = {}
        self.tuned: dict[str, dict] = {}
        self.measured: dict[str, dict] = {}
        self.stopped: str | None = None
        self.failed = False

    def _say(self, text: str) -> None:
        if self.talk:
            elapsed = time.perf_counter() - self.started
            print(f"[{elapsed:6.1f} s] {text}", file=sys.stderr, flush=True)

    def _share(self, phase: str, later: list[str]) -> tuple[float, float] | None:
        """Under the budget, ``(max_seconds, timeout)`` of ``phase``: its share of
        the time left beside the phases of its primitive still to come (``later``,
        the least needed last, left out while the share is too small); None: no
        time for it."""
        assert self.deadline is not None
        left = self.deadline - time.perf_counter() - RESERVE_S
        rest = [phase, *later]
        while rest:
            tuner = left - sum(self.overhead[p] for p in rest)
            share = SLACK * tuner * WEIGHT[phase] / sum(WEIGHT[p] for p in rest)
            if share >= MIN_TUNE_S:
                return min(MAX_SECONDS[phase], share), left
            rest.pop()
        return None

    def phase(
        self, name: str, phase: str, run: str, env: dict, later: list[str]
    ) -> dict | None:
        """Run one phase (None: not run, stopped or failed; the log says which);
        ``later``: the phases of the primitive after it."""
        entry: dict = {"primitive": name, "phase": phase, "run": run}
        self.log.append(entry)
        if self.stopped is None and run != "first" and name not in self.tuned:
            entry["status"] = "not run: the first tuning run did not finish"
            return None
        if self.stopped is not None:
            entry["status"] = f"not run: {self.stopped}"
            return None
        max_seconds = timeout = None
        if self.deadline is not None:
            planned = self._share(phase, later)
            if planned is None:
                entry["status"] = "not run: the budget"
                left = self.deadline - time.perf_counter()
                self._say(f"{name} {run}: not run ({left:.0f} s left)")
                return None
            max_seconds, timeout = planned
            entry["max_seconds"] = round(max_seconds, 1)
        capped = "" if max_seconds is None else f" (max_seconds {max_seconds:.0f})"
        self._say(f"{name} {run}: started{capped}")
        t0 = time.perf_counter()
        try:
            result, info = _run(phase, name, env, self.args.quick, self.platform,
                                max_seconds, timeout)  # fmt: skip
        except _Failed as err:
            entry["status"] = ("stopped: " if err.stopped else "failed: ") + str(err)
            entry["seconds"] = round(time.perf_counter() - t0, 1)
            self.stopped = "the budget" if err.stopped else f"{name} {run} failed"
            self.failed = self.failed or not err.stopped
            self._say(f"{name} {run}: {entry['status']}")
            if err.fatal and not self.talk:  # said once
                print(err, file=sys.stderr)
            return None
        seconds = time.perf_counter() - t0
        entry["seconds"] = round(seconds, 1)
        cut = result.get("cut") or result.get("not_measured")
        entry["status"] = "cut (max_seconds)" if cut else "ok"
        if result.get("cut"):
            entry["cut"] = result["cut"]
        self.info = self.info or info
        if info.get("tune_s") is not None:  # what the tuner's max_seconds misses
            inside = min(info["tune_s"], max_seconds or info["tune_s"])
            outside = max(0.0, seconds - inside)
            if phase in self.seen:
                outside = max(outside, self.overhead[phase])
            self.seen.add(phase)
            self.overhead[phase] = outside
            if phase == "tune" and "measure" not in self.seen:
                self.overhead["measure"] = outside + PER_CALL_GUESS_S
        self._say(f"{name} {run}: {entry['status']} in {seconds:.0f} s")
        return result

    @property
    def partial(self) -> bool:
        return any(e.get("status") != "ok" for e in self.log)

    def document(self) -> dict:
        tuned = self.tuned
        return {
            "machine": self.info.get("machine", {}),
            "tuned_winners": {n: t["winners"] for n, t in tuned.items()},
            "second_winners": {
                n: t["second"] for n, t in tuned.items() if "second" in t
            },
            "tuned_ratios": {n: t["ratios"] for n, t in tuned.items()},
            "scored": {
                n: [t["scored"]] + ([t["second_scored"]] if "second" in t else [])
                for n, t in tuned.items()
            },
            "measured": self.measured,
            "summary": summarize(self.measured, tuned),
            "held_out": list(HELD_OUT),
            "platform": self.platform,
            "device": self.info.get("device"),
            "partial": self.partial,
            "phases": self.log,
        }

    def write(self, targets: list[str]) -> None:
        document = self.document()
        for target in targets:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
            Path(target).write_text(json.dumps(document, indent=1) + "\n")


def _device_problem(platform: str) -> str | None:
    """Why this (child) process cannot measure on ``platform`` (None: it can)."""
    import jax

    from polykernel.platforms import platform_of

    try:
        device = jax.devices()[0]
    except Exception as err:  # a backend JAX_PLATFORMS names did not start
        return f"JAX could not start ({type(err).__name__}: {err})"
    if platform_of(device.platform) != platform:
        return (
            f"JAX's default device is {device.device_kind!r} ({device.platform}), "
            f"no {platform} device (JAX_PLATFORMS="
            f"{os.environ.get('JAX_PLATFORMS')!r}): run on a machine with a CUDA "
            f"GPU and JAX's CUDA plugin"
        )
    return None


def _info(name: str, platform: str) -> dict:
    """What the summary says of the device a child measured on."""
    import jax

    from polykernel.benchmark.machine import machine_info

    device = jax.devices()[0]
    return {
        "platform": platform,
        "device": device.device_kind,
        "device_platform": device.platform,
        "machine": machine_info(),
        "tune_s": _TUNE_SECONDS.get(name),
    }


def _child(args: argparse.Namespace) -> int:
    if args.platform != "cpu":
        problem = _device_problem(args.platform)
        if problem is not None:
            print(f"bench_tuning: --platform {args.platform}: {problem}",
                  file=sys.stderr)  # fmt: skip
            return NO_DEVICE
    fn = phase_tune if args.phase == "tune" else phase_measure
    result = fn(args.quick, [args.primitive], args.platform, args.max_seconds)
    print("RESULT " + json.dumps(result))
    print("INFO " + json.dumps(_info(args.primitive, args.platform)))
    return 0


def _met(summary: dict) -> bool:
    def at_least(value: float | None, target: float) -> bool:
        return value is not None and value >= target

    return all(
        at_least(s["tuned_within"], 0.9)
        and at_least(s["held_out_within"], 0.8)
        and s["per_call_ratio"] <= 1.02
        and s["worse_than_default"] == 0
        and (s["flip_rate"] or 0.0) <= 0.10
        for s in summary.values()
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase", choices=["tune", "measure"], help=argparse.SUPPRESS)
    parser.add_argument("--primitive", choices=PRIMITIVES, help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="shorter timing budgets")
    parser.add_argument(
        "--platform", choices=PLATFORMS, default="cpu",
        help="where the kernels run (gpu: a CUDA GPU, JAX_PLATFORMS=cuda,cpu)",
    )  # fmt: skip
    parser.add_argument(
        "--primitives", nargs="+", choices=PRIMITIVES, default=list(PRIMITIVES),
        help="the primitives to run (default: all)",
    )  # fmt: skip
    parser.add_argument(
        "--budget", type=float, metavar="SECONDS",
        help="the whole run's time limit: no phase starts that would not fit, and "
        "what was measured is printed, marked partial",
    )  # fmt: skip
    parser.add_argument("--json", help="write the full results here (after each phase)")
    parser.add_argument("--docs", help="write the docs' data file here")
    args = parser.parse_args()
    if args.budget is not None and args.budget <= 0:
        parser.error(f"--budget must be > 0 seconds, got {args.budget}")
    sys.path.insert(0, str(HERE.parent / "src"))
    if args.phase:
        return _child(args)
    run_dir = Path(run_directory("polykernel-bench-tuning-"))
    env = _environment(run_dir, args.platform)
    # The second tuning run writes a table of its own (its config directory): the
    # two runs are independent, as two users' `polykernel tune` are.
    second = {**env, "POLYKERNEL_CONFIG_DIR": str(run_dir / "config-second")}
    driver = _Driver(args)
    # Under a budget the measurement comes before the second tuning run (which only
    # checks the first's winners): a budget that runs out leaves the flip rate out.
    order = [("tune", "first"), ("tune", "second"), ("measure", "measure")]
    if args.budget is not None:
        order = [order[0], order[2], order[1]]
    # One fresh process per phase and primitive, as a user's `polykernel tune` and
    # a later program are: what one primitive's timing leaves in a process (thread
    # pools started from other threads, say) never reaches the other's.
    for name in dict.fromkeys(args.primitives):
        for k, (phase, run) in enumerate(order):
            # the time left is shared with the measurement; the second tuning run
            # (the flip rate) gets what they leave
            later = [p for p, r in order[k + 1 :] if r != "second"]
            result = driver.phase(
                name, phase, run, second if run == "second" else env, later
            )
            if result is None:
                continue
            if run == "first":
                driver.tuned[name] = {**result, "first": result["winners"]}
            elif run == "second":
                driver.tuned[name].update(
                    second=result["winners"], second_scored=result["scored"]
                )
            else:
                driver.measured[name] = result
            driver.write([args.json] if args.json else [])
    if not driver.tuned and not driver.measured:
        print("bench_tuning: nothing was measured", file=sys.stderr)
        driver.write([args.json] if args.json else [])
        return 1
    summary = summarize(driver.measured, driver.tuned)
    if args.platform != "cpu":
        print(f"\nplatform {args.platform}: {driver.info.get('device', 'unknown')}")
    _print(driver.measured, summary, args.platform)
    for name in [n for n in driver.tuned if n not in driver.measured]:
        print(
            f"\n{name}: tuned on {len(driver.tuned[name]['winners'])} shapes, "
            f"not measured"
        )
    partial = driver.partial
    if partial:
        print("\nPARTIAL results; phases:")
        for e in driver.log:
            print(f"  {e['primitive']} {e['run']}: {e['status']}")
    targets = [args.json] if args.json else []
    if args.docs and partial:
        print(f"bench_tuning: partial: {args.docs} not written", file=sys.stderr)
    elif args.docs:
        targets.append(args.docs)
    driver.write(targets)
    met = not partial and _met(summary)
    print(
        "\ntargets "
        + ("met" if met else "NOT met")
        + (" (partial results)" if partial else "")
    )
    if driver.failed:
        return 1
    return 0 if met else 2


if __name__ == "__main__":
    sys.exit(main())
