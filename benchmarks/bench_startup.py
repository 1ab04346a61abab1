"""A kernel's first result in a fresh process, phase by phase, per backend.

For the catalog's ``scaled_add`` (10^5 elements) on each CPU backend — Numba
serial, Numba ``parallel=True``, C++ (``cuda_raw`` on the CPU) and Warp — a fresh
process runs a user's module: it imports what the user's own code imports (JAX,
NumPy, polykernel's catalog and the backend's package), then jits a function that
calls the kernel, and records the time of each phase:

- ``import``: imports and the kernel's definition (the user's own cost);
- ``trace``: ``jax.jit(f).trace(...)``;
- ``lower``: ``.lower()`` — for polykernel, where the kernel is built (empty
  cache) or loaded (filled cache) and registered;
- ``compile``: XLA's compile of the program;
- ``launch``: the first call, until its result is ready.

Each is run with an **empty** cache (a new directory for every process) and a
**filled** one (built once before), and against the **baseline**: the same module
and program with ``jnp`` in the kernel's place. Processes of all kinds are
interleaved round by round, so a drift of the machine meets all of them alike;
the table gives medians and spreads (IQR / median) per phase and polykernel's
share of the first result: the kernel's trace + lower + compile + launch minus
the baseline's, as measured and without the time Python's garbage collector ran
in it. Each process collects its heap once at the end of the import phase (as
``timeit`` keeps the collector out of what it times): a full collection of a JAX
process's heap costs ~50-70 ms here and comes once enough objects have been kept
since the last one, so without it the import's own garbage made one fall inside
one program's first result and just outside the other's, by a couple of thousand
objects. What a first result does add to the next collection is printed instead:
the objects it keeps (alive after a collection at its end), kernel and baseline.
It also lists the compiler
packages (numba, llvmlite, warp, triton) a filled-cache process imported beyond
those the user's module imported
itself, and the compiler processes it started.

``--platform gpu``: the GPU kernels — the catalog's numba_cuda, triton, pallas and
warp (skipped with a note if ``import warp`` fails) and cuda_raw, an nvcc-built
CUDA kernel the user's module registers (the catalog's is C++, CPU only); children
run with ``JAX_PLATFORMS=cuda,cpu`` and their arrays on the GPU (checked), numba.cuda
and cupy are watched too, and the table adds each process's wall time. There each
backend has its own cache, filled by the first round's empty-cache run (a cold CUDA
process costs seconds), and a failing backend is noted and dropped. Without a CUDA
GPU it exits with status 2; ``--dry-run`` checks, traces and lowers each kernel for
CUDA without one. ``--budget S``: a round starts only if the slowest so far fits in
what is left of S seconds (and no process after them); ``--json`` is rewritten
after every round.

Target (issue 36): polykernel's share <= 10 ms with a filled cache, no compiler
package imported and no compiler started on that path.

Run: ``python benchmarks/bench_startup.py [--platform gpu] [--reps 7] [--backends
...] [--budget S] [--json F] [--dry-run]`` (``--child``: its role in a new process).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _env import cache_environment, user_python

#: platform -> backend -> (the package its user imports, the call's keywords)
BACKENDS = {
    "cpu": {
        "numba": ("numba", {"backend": "numba", "parallel": False}),
        "numba_parallel": ("numba", {"backend": "numba", "parallel": True}),
        "cpp": (None, {"backend": "cuda_raw", "grain": 0}),
        "warp": ("warp", {"backend": "warp"}),
    },
    "gpu": {  # launch parameters: the catalog's defaults (its first candidates)
        "numba_cuda": ("numba.cuda", {"backend": "numba_cuda",
                                      "threads_per_block": 256}),
        "triton": ("triton", {"backend": "triton", "BLOCK": 1024, "num_warps": 4}),
        "cuda_raw": (None, {"backend": "cuda_raw"}),
        "pallas": (None, {"backend": "pallas", "block": 1024}),
        "warp": ("warp", {"backend": "warp"}),
    },
}
COMPILERS = {
    "cpu": ("numba", "llvmlite", "warp", "triton"),
    "gpu": ("numba", "llvmlite", "warp", "triton", "numba.cuda", "cupy"),
}
#: Every child's environment besides its cache directories.
CHILD_ENV = {
    "cpu": {"JAX_PLATFORMS": "cpu", "NUMBA_THREADING_LAYER": "omp"},
    "gpu": {"JAX_PLATFORMS": "cuda,cpu", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
}
LOWERING = {"cpu": "cpu", "gpu": "cuda"}  # --dry-run lowers for this
PHASES = ("import", "trace", "lower", "compile", "launch")
N = 100_000
GRACE = 5.0  # seconds a process may run past the budget before it is stopped

#: ``scaled_add`` in CUDA: the ``cuda_raw`` kernel the user's module registers.
CUDA_SCALED_ADD = r"""
__global__ void axpy(const float* x, const float* y, float* o, float a, int64_t n) {
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) o[i] = a * x[i] + y[i];
}
void scaled_add(const pk::Tensor& x, const pk::Tensor& y, pk::Tensor& out,
                float alpha, cudaStream_t stream) {
  int64_t n = out.numel();  // > 0 here
  axpy<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                            out.data_ptr<float>(), alpha, n);
}
"""


def _cuda_generator(outs, alpha, **kwargs):
    from polykernel.backends.cuda_raw import load_cuda_inline  # built when lowered

    module = load_cuda_inline("bench_startup_scaled_add", CUDA_SCALED_ADD,
                              ["scaled_add"])  # fmt: skip
    return lambda x, y: module.scaled_add(x, y, outs=outs[0], alpha=float(alpha))


class _Collections:
    """Milliseconds the garbage collector ran, per phase (``phase``: the current)."""

    def __init__(self) -> None:
        self.phase, self.ms, self._start = "import", dict.fromkeys(PHASES, 0.0), 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, stage: str, info: dict) -> None:
        if stage == "start":
            self._start = time.perf_counter()
        else:
            spent = (time.perf_counter() - self._start) * 1e3
            self.ms[self.phase] = self.ms.get(self.phase, 0.0) + spent


def child(platform: str, backend: str, kind: str, dry: bool = False) -> None:
    """One fresh process: the phases of one first result, as JSON on stdout."""
    started = time.perf_counter()
    collections = _Collections()
    spawned: list[str] = []
    real_popen = subprocess.Popen.__init__

    def counting(self, args, *rest, **kw):  # a compiler process is a Popen
        spawned.append(str(args if isinstance(args, str) else args[0]))
        real_popen(self, args, *rest, **kw)

    subprocess.Popen.__init__ = counting  # type: ignore[method-assign]
    package, keywords = BACKENDS[platform][backend]
    import jax
    import jax.numpy as jnp
    import numpy as np

    from polykernel.catalog import scaled_add_p

    if package is not None:
        __import__(package)
    gpu = platform == "gpu"
    own_cuda = gpu and backend == "cuda_raw"  # the user's module brings the kernel
    if own_cuda and "cuda_raw" not in scaled_add_p.available_backends("gpu"):
        scaled_add_p.def_cuda_raw_kernel(_cuda_generator, platform="gpu")
    x = np.ones(N, np.float32)
    device = None
    if gpu and not dry:  # cuda first in JAX_PLATFORMS: the GPU is the default device
        device = jax.devices()[0]
        assert device.platform == "gpu", f"no CUDA GPU visible: {device.platform}"
        x = jax.device_put(x, device).block_until_ready()
    compilers = COMPILERS[platform]
    user_modules = {m for m in compilers if m in sys.modules}
    gc.collect()  # the window starts from a collected heap (see the docstring)
    tracked = len(gc.get_objects())
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)

    def kernel(a, b):
        return scaled_add_p(a, b, outs=spec, alpha=2.0, **keywords)

    def baseline(a, b):
        return 2.0 * a + b

    fn = jax.jit(kernel if kind == "kernel" else baseline)
    marks = {"import": time.perf_counter() - started}
    collections.phase = "trace"
    t = time.perf_counter()
    traced = fn.trace(x, x)
    marks["trace"] = time.perf_counter() - t
    collections.phase = "lower"
    if dry:  # registered for the platform, takes the keywords, lowers for it
        tunables = scaled_add_p.tunables(platform)
        assert keywords["backend"] in tunables, tunables
        known = {"backend", *(name for name, _ in tunables[keywords["backend"]])}
        assert set(keywords) <= known, f"launch parameters: {known}"
        t = time.perf_counter()
        traced.lower(lowering_platforms=(LOWERING[platform],))
        marks["lower"] = time.perf_counter() - t
        print(json.dumps({"marks": marks, "keywords": keywords, "spawned": spawned}))
        return
    t = time.perf_counter()
    lowered = traced.lower()
    marks["lower"] = time.perf_counter() - t
    collections.phase = "compile"
    t = time.perf_counter()
    compiled = lowered.compile()
    marks["compile"] = time.perf_counter() - t
    collections.phase = "launch"
    t = time.perf_counter()
    out = compiled(x, x)
    jax.block_until_ready(out)
    marks["launch"] = time.perf_counter() - t
    collections.phase = "after"
    gc_ms = {p: collections.ms[p] for p in PHASES}
    gc.collect()
    kept = len(gc.get_objects()) - tracked
    assert float(np.asarray(out)[0]) == 3.0
    if device is not None:
        assert {d.platform for d in out.devices()} == {"gpu"}, out.devices()
    extra = sorted(m for m in compilers if m in sys.modules and m not in user_modules)
    print(json.dumps({"marks": marks, "imported": extra, "spawned": spawned,
                      "device": device.device_kind if device else None,
                      "gc_ms": gc_ms, "kept": kept}))  # fmt: skip
    del jnp


class ChildFailed(Exception):
    """A child failed or was stopped: ``args`` are the full story and one line."""


def _run(platform: str, backend: str, kind: str, env: dict[str, str],
         timeout: float = 600.0, dry: bool = False) -> dict:  # fmt: skip
    command = [sys.executable, __file__, "--child", platform, backend, kind]
    start = time.perf_counter()
    try:
        done = subprocess.run(
            command + ["--dry-run"] * dry,
            env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired as err:
        why = f"{backend} {kind}: stopped after {timeout:.0f} s"
        raise ChildFailed(why, why) from err
    if done.returncode != 0:
        why = f"{backend} {kind}: exit {done.returncode}"
        last = (done.stderr.strip().splitlines() or ["?"])[-1][:300]
        raise ChildFailed(f"{why}\n{done.stderr}", f"{why}: {last}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = time.perf_counter() - start
    return result


PROBE = ("import jax; d = jax.devices()[0]; "
         "print(d.platform, jax.__version__, d.device_kind)")  # fmt: skip


def _gpu_device(env: dict[str, str]) -> str:
    """The first device's kind in a child with ``env``; exit 2 if it is no GPU."""
    try:
        done = subprocess.run([sys.executable, "-c", PROBE], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        first = done.stdout.split(maxsplit=2) or ["none"]
        why = (f"its first device is {first[0]}" if done.returncode == 0
               else (done.stderr.strip().splitlines() or ["?"])[-1][:300])  # fmt: skip
    except subprocess.TimeoutExpired:
        first, why = ["none"], "no answer in 120 s"
    if first[0] != "gpu" or len(first) < 3:
        print(f"bench_startup: no CUDA GPU visible to JAX (JAX_PLATFORMS=cuda,cpu: "
              f"{why}), so there is nothing to measure on gpu. Run it on a machine "
              "with an NVIDIA GPU and a CUDA-enabled jax; --dry-run checks the GPU "
              "kernels without one.", file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    return f"{first[2].strip()} (jax {first[1]})"


def _stats(values: list[float]) -> tuple[float, float]:
    median = statistics.median(values)
    if len(values) < 4 or median == 0:
        return median, 0.0
    q = statistics.quantiles(values, n=4)
    return median, (q[2] - q[0]) / median


class _BudgetSpent(Exception):
    """The budget ran out before a process could start."""


def _measure(platform, chosen, reps, deadline, tmp, meta, save) -> dict:
    """The processes, round by round; ``{(backend, cache, kind): [result, ...]}``."""
    gpu, notes = platform == "gpu", meta["notes"]
    runs: dict[tuple[str, str, str], list[dict]] = {}
    base = user_python({**os.environ, **CHILD_ENV[platform]})

    def run(backend: str, kind: str, cache_dir: str, cache: str = "") -> None:
        left = deadline - time.perf_counter()
        if backend not in chosen:  # dropped earlier in this round
            return
        if left <= 0:
            raise _BudgetSpent
        env = {**base, **cache_environment(cache_dir)}
        try:
            result = _run(platform, backend, kind, env, min(600.0, left + GRACE))
        except ChildFailed as err:
            if time.perf_counter() >= deadline:
                raise _BudgetSpent from err
            if not gpu:
                raise SystemExit(err.args[0]) from err
            notes.append(f"{backend}: dropped, {err.args[1]}")
            chosen.remove(backend)
            return
        if cache:
            runs.setdefault((backend, cache, kind), []).append(result)

    def filled(backend: str) -> str:  # CPU: one cache filled first; GPU: one each
        return os.path.join(tmp, f"filled-{backend}" if gpu else "filled")

    slowest, rep = 0.0, 0
    try:
        if not gpu:
            for backend in chosen:  # fill the cache once
                run(backend, "kernel", filled(backend))
        for rep in range(reps):
            start = time.perf_counter()
            if rep and start + slowest > deadline:
                notes.append(f"budget: {rep} of {reps} rounds done (a round takes up "
                             f"to {slowest:.0f} s)")  # fmt: skip
                break
            for backend in list(chosen):
                empty = os.path.join(tmp, f"empty-{rep}-{backend}")
                if gpu and rep == 0:  # this empty-cache run fills the backend's cache
                    empty = filled(backend)
                dirs = {"filled": filled(backend), "empty": empty}
                for cache in ("empty", "filled") if gpu else ("filled", "empty"):
                    for kind in ("kernel", "baseline"):
                        run(backend, kind, dirs[cache], cache)
                if empty != filled(backend):
                    shutil.rmtree(empty, ignore_errors=True)
            slowest = max(slowest, time.perf_counter() - start)
            meta["rounds"] = rep + 1
            save(runs)
    except _BudgetSpent:
        notes.append(f"budget: spent during round {rep + 1} of {reps} (its finished "
                     "processes are counted)")  # fmt: skip
    return runs


def _rows(runs: dict) -> list[dict]:
    rows = []
    for (backend, cache, kind), results in sorted(runs.items()):
        row = {"backend": backend, "cache": cache, "kind": kind, "n": len(results)}
        for phase in PHASES:
            row[phase] = _stats([r["marks"][phase] for r in results])
        first = [sum(r["marks"][p] for p in PHASES[1:]) for r in results]
        row["first result"] = _stats(first)
        # The same, less the time the garbage collector ran in it (see _report).
        gc_s = [sum(r.get("gc_ms", {}).get(p, 0.0) for p in PHASES[1:]) / 1e3
                for r in results]  # fmt: skip
        row["gc"] = _stats(gc_s)
        row["without gc"] = _stats([f - g for f, g in zip(first, gc_s, strict=True)])
        row["kept"] = statistics.median(r.get("kept", 0) for r in results)
        row["process"] = _stats([r["process"] for r in results])
        row["imported"] = sorted({m for r in results for m in r["imported"]})
        row["spawned"] = sorted({s for r in results for s in r["spawned"]})
        rows.append(row)
    return rows


def _report(rows: list[dict], backends: list[str], gpu: bool) -> None:
    columns = (*PHASES, "first result", *(("process",) if gpu else ()))
    count = f"{'n':>4}" if gpu else ""
    print(f"{'backend':<15}{'cache':<7}{'kind':<9}"
          + "".join(f"{p:>14}" for p in columns) + count)  # fmt: skip
    for row in rows:
        cells = "".join(
            f"{row[p][0] * 1e3:8.1f} ±{row[p][1] * 100:3.0f}%" for p in columns
        )
        count = f"{row['n']:>4}" if gpu else ""
        print(f"{row['backend']:<15}{row['cache']:<7}{row['kind']:<9}{cells}{count}")
    print("\npolykernel's share of the first result (kernel - baseline, medians):")
    found = {(r["backend"], r["cache"], r["kind"]): r for r in rows}
    for backend in backends:
        for cache in ("filled", "empty"):
            k = found.get((backend, cache, "kernel"))
            b = found.get((backend, cache, "baseline"))
            if k is None or b is None:
                print(f"  {backend:<15}{cache:<7}     n/a")
                continue
            share = (k["first result"][0] - b["first result"][0]) * 1e3
            bare = (k["without gc"][0] - b["without gc"][0]) * 1e3
            print(f"  {backend:<15}{cache:<7}{share:8.1f} ms  ({bare:.1f} ms without "
                  f"garbage collection)")  # fmt: skip
            print(f"  {'':<22}the collector ran {k['gc'][0] * 1e3:.0f} / "
                  f"{b['gc'][0] * 1e3:.0f} ms in the kernel's / baseline's first "
                  f"result")  # fmt: skip
            print(f"  {'':<22}imported beyond the user's: {k['imported'] or 'none'}; "
                  f"processes started: {k['spawned'] or 'none'}")  # fmt: skip
            print(f"  {'':<22}objects kept by the first result: {k['kept']:.0f} "
                  f"(baseline {b['kept']:.0f})")  # fmt: skip
    print("  (Each process collects once before the first result; the objects it "
          "keeps bring the\n  process's next full collection nearer by as many.)")


def _save(path: str | None, platform: str, rows: list[dict], meta: dict) -> None:
    if path:
        with open(f"{path}.tmp", "w") as handle:
            json.dump(rows if platform == "cpu" else {**meta, "rows": rows}, handle,
                      indent=1)  # fmt: skip
        os.replace(f"{path}.tmp", path)


def _dry_run(platform: str, chosen: list[str], tmp: str) -> int:
    """Each backend's kernel traced and lowered in a child that has no GPU."""
    env = {**os.environ, **cache_environment(tmp), "JAX_PLATFORMS": "cpu"}
    env.setdefault("POLYKERNEL_CUDA_ARCH", "90")  # no GPU here to detect it from
    failed = 0
    for backend in chosen:
        try:
            r = _run(platform, backend, "kernel", env, dry=True)
        except ChildFailed as err:
            failed += 1
            print(f"{backend:<12}FAILED {err.args[1]}")
            continue
        print(f"{backend:<12}ok: {r['keywords']} traced in "
              f"{r['marks']['trace'] * 1e3:.0f} ms, lowered for {LOWERING[platform]} "
              f"in {r['marks']['lower']:.1f} s; processes started: "
              f"{r['spawned'] or 'none'}")  # fmt: skip
    return 1 if failed else 0


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5], dry="--dry-run" in sys.argv[5:])
        return
    begun = time.perf_counter()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--backends", help="comma-separated (default: the platform's)")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="start no round that would end after it")  # fmt: skip
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--dry-run", action="store_true",
                        help="check, trace, lower each kernel; run none")  # fmt: skip
    args = parser.parse_args()
    platform, gpu = args.platform, args.platform == "gpu"
    table = BACKENDS[platform]
    chosen = [b for b in (args.backends or ",".join(table)).split(",") if b]
    if unknown := [b for b in chosen if b not in table]:
        parser.error(f"{platform} has no backends {unknown}: {list(table)}")
    meta = {"platform": platform, "device": None, "reps": args.reps, "rounds": 0,
            "budget": args.budget, "notes": []}  # fmt: skip
    if gpu and not args.dry_run:
        meta["device"] = _gpu_device({**os.environ, **CHILD_ENV["gpu"]})
        print(f"device: {meta['device']}", flush=True)
    notes = meta["notes"]
    try:
        if gpu and "warp" in chosen:
            importlib.import_module("warp")
    except Exception as err:  # not installed, or broken
        chosen.remove("warp")
        notes.append(f"warp: skipped, `import warp` failed ({type(err).__name__}: "
                     f"{str(err)[:200]})")  # fmt: skip
    backends = list(chosen)
    with tempfile.TemporaryDirectory(prefix="pk-startup-") as tmp:
        if args.dry_run:
            status = _dry_run(platform, chosen, tmp)
            for note in notes:
                print(note)
            raise SystemExit(status)
        deadline = begun + args.budget if args.budget else math.inf
        save = lambda done: _save(args.json, platform, _rows(done), meta)  # noqa: E731
        runs = _measure(platform, chosen, args.reps, deadline, tmp, meta, save)
    rows = _rows(runs)
    _report(rows, backends, gpu)
    if gpu or notes:
        print(f"\nrounds done: {meta['rounds']} of {args.reps}")
        for note in notes:
            print(note)
    _save(args.json, platform, rows, meta)
    if not rows:
        raise SystemExit(1)  # nothing measured


if __name__ == "__main__":
    main()
