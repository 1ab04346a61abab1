"""``polykernel cache warm TARGET ...``: build kernels into the cache ahead of a job.

A TARGET is a module (``mylib.ops``) or a ``.py`` file (imported from its path under
its own name, :mod:`.targets`) whose primitives are warmed — every backend
registered for the platform, on every configuration of the primitive's benchmark
data (``def_benchmark_data``), called once through its call function
(``def_call``) — or ``module:function`` / ``file.py:function``, a function taking no
argument that runs the kernels itself. Each kernel built on the way lands in the
writable cache (``POLYKERNEL_CACHE_DIR``), so a job (or a read-only tier made from
it, ``POLYKERNEL_CACHE_READONLY``) starts with a ready cache.

Every target is parsed and imported before anything is warmed, as ``--module`` is
by the other commands (a malformed or missing target, or one calling ``sys.exit``
while imported: exit 2; one whose import raises: exit 1). Then a primitive whose
benchmark data or call fails, a kernel that fails to build, or a function that
raises (or calls ``sys.exit``) is reported — on stdout in its place, and as one
``polykernel cache warm: error: ...`` line on stderr at the end — the others go on,
and the exit code is 1.

Kernels are independent, so they are warmed ``--jobs`` at a time (default: every core
this process may run on, ``os.sched_getaffinity``), in a pool of threads: a build
waits on its compiler process or XLA's compiler, neither holding the GIL, so C++
modules (and XLA programs) build on all cores at once; the cache's per-entry locks
make two jobs needing one module build it once. The benchmark data is made in the
main thread, target by target, while earlier kernels build. The output is the same
whatever ``--jobs`` is: every line in target order, printed once everything before
it is done; a target's time is its own work's, summed over its kernels (which
overlap with ``--jobs`` above 1, so the sum may exceed the wall time). ``--jobs 1``
runs each kernel in turn in the main thread.
"""

from __future__ import annotations

import inspect
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import Any

from ..core import registry
from ..platforms import PLATFORMS
from ..settings.host import usable_cores
from ._common import CliError, CliUsageError, failure, plural, pos_int
from .targets import Target, import_module, parse_target

__all__ = ["add_warm_args", "cmd_warm", "default_jobs", "warm_primitive"]

#: A job's outcome: its error (None: it ran) and the seconds it took.
Outcome = tuple[str | None, float]


def default_jobs() -> int:
    """The cores this process may run on (``os.sched_getaffinity``), at least 1."""
    return len(usable_cores())


def add_warm_args(p: Any) -> None:
    """Arguments of ``polykernel cache warm``."""
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="module, file.py, or module:function (repeatable)")  # fmt: skip
    p.add_argument("--platform", default=None, choices=PLATFORMS,
                   help="platform to build for (default: JAX's default "
                   "backend)")  # fmt: skip
    p.add_argument("-j", "--jobs", type=pos_int, default=None, metavar="N",
                   help="kernels warmed at once (default: the cores this process "
                   "may use; 1: one after another)")  # fmt: skip


def _run(fn: Callable[[], Any]) -> Outcome:
    """Run ``fn``; its error as one line (None: it ran) and the seconds it took."""
    start = time.perf_counter()
    try:
        fn()
    except (Exception, SystemExit) as err:  # reported; the others still warm
        return failure(err), time.perf_counter() - start
    return None, time.perf_counter() - start


class _Runner:
    """Runs jobs in a pool of ``jobs`` threads, or (``jobs == 1``) one at a time in
    the calling thread when their result is asked for."""

    def __init__(self, jobs: int) -> None:
        self.pool = ThreadPoolExecutor(jobs, "pk-warm") if jobs > 1 else None

    def submit(self, fn: Callable[[], Any]) -> Callable[[], Outcome]:
        """Start ``fn`` (pool) or keep it for later; the function giving its outcome."""
        if self.pool is None:
            return lambda: _run(fn)
        future: Future[Outcome] = self.pool.submit(_run, fn)
        return future.result

    def close(self, cancel: bool) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=cancel)


def _first(fn: Callable[..., Any], args: tuple) -> None:
    """One call of the jitted ``fn``, waited for: the kernel is built and run."""
    import jax

    jax.block_until_ready(fn(*args))


def _kernel_jobs(kernel: Any, platform: str, runner: _Runner) -> tuple[list, float]:
    """Submit every (config, backend) of ``kernel``: ``[(backend, config, outcome)]``
    (``outcome()`` waits for it) and the seconds the data took.

    Raises:
        Exception, SystemExit: the benchmark data function fails (nothing to run).
    """
    import jax

    from ..benchmark.runner import plan_benchmark

    start = time.perf_counter()
    plan = plan_benchmark(kernel, platform=platform)
    device = jax.local_devices(backend=platform)[0]
    jobs = []
    for cfg in plan.configs:
        try:
            args = cfg.put_args(device).args
        except (Exception, SystemExit) as err:  # this config cannot be placed
            placed = (failure(err), 0.0)
            jobs.extend((b, cfg.name, lambda p=placed: p) for b in plan.backends)
            continue
        for backend in plan.backends:
            fn = jax.jit(lambda *a, b=backend, kw=cfg.kernel_kwargs:
                         kernel.call(*a, backend=b, **kw))  # fmt: skip
            jobs.append((backend, cfg.name, runner.submit(partial(_first, fn, args))))
    return jobs, time.perf_counter() - start


def warm_primitive(
    kernel: Any, platform: str, jobs: int = 1
) -> list[tuple[str, str, str | None]]:
    """Run every (config, backend) of ``kernel`` once, ``jobs`` at a time;
    ``(backend, config, error)`` in the plan's order.

    Raises:
        Exception, SystemExit: the benchmark data function fails (nothing to run).
    """
    runner = _Runner(jobs)
    try:
        planned, _ = _kernel_jobs(kernel, platform, runner)
        return [(b, c, outcome()[0]) for b, c, outcome in planned]
    finally:
        runner.close(cancel=True)


def _function(target: Target, module: Any) -> Any:
    """``target``'s function, checked to take no argument."""
    fn = getattr(module, target.function or "", None)
    if not callable(fn):
        raise CliUsageError(
            f"target {target.text!r}: module {target.module!r} has no function "
            f"{target.function!r}; pass module:function naming a function that "
            "takes no argument."
        )
    try:
        inspect.signature(fn).bind()
    except TypeError:
        raise CliUsageError(
            f"target {target.text!r}: {target.function}{inspect.signature(fn)} "
            "needs arguments; pass a function that takes none (wrap the call)."
        ) from None
    except ValueError:  # no signature (a builtin): let the call decide
        pass
    return fn


def _check_platform(platform: str) -> None:
    import jax

    try:
        jax.devices(platform)
    except RuntimeError as err:
        raise CliError(
            f"--platform {platform}: JAX sees no {platform} device here "
            f"({' '.join(str(err).split())}). Warm on a machine that has one, or "
            "choose another --platform."
        ) from None


def _submit_module(names: list[str], platform: str, runner: _Runner) -> list:
    """Each primitive's work, submitted: ``(name, skipped, data error, data
    seconds, jobs)`` in order."""
    planned = []
    for name in names:
        kernel = registry.get_primitive(name)
        if kernel.benchmark_data_function is None or kernel.call_function is None:
            planned.append((name, True, None, 0.0, []))
            continue
        start = time.perf_counter()
        try:
            jobs, seconds = _kernel_jobs(kernel, platform, runner)
        except (Exception, SystemExit) as err:  # its data: the others still warm
            planned.append((name, False, failure(err),
                            time.perf_counter() - start, []))  # fmt: skip
            continue
        planned.append((name, False, None, seconds, jobs))
    return planned


def _report_module(planned: list, errors: list[str]) -> float:
    """Print each primitive's lines (waiting for its jobs); the seconds they took."""
    total = 0.0
    for name, skipped, data_error, seconds, jobs in planned:
        total += seconds
        if skipped:
            print(f"{name}: skipped (no def_benchmark_data / def_call)")
        elif data_error is not None:
            print(f"{name}: FAILED ({data_error})")
            errors.append(f"{name}: benchmark data: {data_error}")
        for backend, config, outcome in jobs:
            error, took = outcome()
            total += took
            print(f"{name} {backend} {config}: "
                  f"{'ready' if error is None else f'FAILED ({error})'}",
                  flush=True)  # fmt: skip
            if error is not None:
                errors.append(f"{name} {backend} {config}: {error}")
    return total


def _load(targets: list[Target]) -> list[tuple[Target, list[str], Any]]:
    """Import every target; ``(target, its module's primitives, function)``."""
    by_module: dict[str, list[str]] = {}  # a module named twice: the same names
    loaded = []
    for target in targets:
        before = set(registry.get_all_primitive_names())
        module = import_module(target)
        added = sorted(set(registry.get_all_primitive_names()) - before)
        names = by_module.setdefault(module.__name__, added)
        fn = _function(target, module) if target.function else None
        loaded.append((target, names, fn))
    return loaded


def cmd_warm(args: Any) -> int:
    """Handler of ``polykernel cache warm``."""
    import jax

    targets = [parse_target(t, "target", functions=True) for t in args.targets]
    loaded = _load(targets)  # every target imported before any work
    platform = args.platform or jax.default_backend()
    if any(fn is None for _, _, fn in loaded):
        _check_platform(platform)
    errors: list[str] = []
    warmed: set[str] = set()
    runner = _Runner(getattr(args, "jobs", None) or default_jobs())
    finished = False
    try:
        work: list[tuple[Any, list[str], Any]] = []  # all submitted first, in order
        for target, names, fn in loaded:
            if fn is not None:
                work.append((target, names, runner.submit(fn)))
                continue
            todo = [n for n in names if n not in warmed]
            warmed.update(names)
            work.append((target, names, _submit_module(todo, platform, runner)))
        for target, names, done in work:  # then reported in the same order
            if callable(done):
                error, took = done()  # pyright: ignore[reportGeneralTypeIssues]
                if error is None:
                    print(f"{target.text}: ran ({took:.1f} s)", flush=True)
                else:
                    print(f"{target.text}: FAILED ({error})", flush=True)
                    errors.append(f"{target.text}: {error}")
                continue
            took = _report_module(done, errors)
            print(f"{target.text}: {plural(len(names), 'primitive')} "
                  f"({took:.1f} s)", flush=True)  # fmt: skip
        finished = True
    finally:
        runner.close(cancel=not finished)
    for line in errors:
        print(f"polykernel cache warm: error: {line}", file=sys.stderr)
    return 1 if errors else 0
