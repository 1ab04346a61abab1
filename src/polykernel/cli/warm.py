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
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any

from ..core import registry
from ..platforms import PLATFORMS
from ._common import CliError, CliUsageError, failure, plural
from .targets import Target, import_module, parse_target

__all__ = ["add_warm_args", "cmd_warm", "warm_primitive"]


def add_warm_args(p: Any) -> None:
    """Arguments of ``polykernel cache warm``."""
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="module, file.py, or module:function (repeatable)")  # fmt: skip
    p.add_argument("--platform", default=None, choices=PLATFORMS,
                   help="platform to build for (default: JAX's default "
                   "backend)")  # fmt: skip


def warm_primitive(kernel: Any, platform: str) -> list[tuple[str, str, str | None]]:
    """Run every (config, backend) of ``kernel`` once; ``(backend, config, error)``.

    Raises:
        Exception, SystemExit: the benchmark data function fails (nothing to run).
    """
    import jax

    from ..benchmark.runner import plan_benchmark

    plan = plan_benchmark(kernel, platform=platform)
    device = jax.local_devices(backend=platform)[0]
    done = []
    for cfg in plan.configs:
        try:
            args = cfg.put_args(device).args
        except (Exception, SystemExit) as err:  # this config cannot be placed
            done.extend((b, cfg.name, failure(err)) for b in plan.backends)
            continue
        for backend in plan.backends:
            try:
                fn = jax.jit(lambda *a, b=backend, kw=cfg.kernel_kwargs:
                             kernel.call(*a, backend=b, **kw))  # fmt: skip
                jax.block_until_ready(fn(*args))
                done.append((backend, cfg.name, None))
            except (Exception, SystemExit) as err:  # reported; the others still warm
                done.append((backend, cfg.name, failure(err)))
    return done


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


def _warm_module(names: list[str], platform: str, errors: list[str]) -> None:
    for name in names:
        kernel = registry.get_primitive(name)
        if kernel.benchmark_data_function is None or kernel.call_function is None:
            print(f"{name}: skipped (no def_benchmark_data / def_call)")
            continue
        try:
            results = warm_primitive(kernel, platform)
        except (Exception, SystemExit) as err:  # its data: the others still warm
            print(f"{name}: FAILED ({failure(err)})")
            errors.append(f"{name}: benchmark data: {failure(err)}")
            continue
        for backend, config, error in results:
            print(f"{name} {backend} {config}: "
                  f"{'ready' if error is None else f'FAILED ({error})'}")  # fmt: skip
            if error is not None:
                errors.append(f"{name} {backend} {config}: {error}")


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
    for target, names, fn in loaded:
        start = time.perf_counter()
        if fn is not None:
            try:
                fn()
                print(f"{target.text}: ran ({time.perf_counter() - start:.1f} s)")
            except (Exception, SystemExit) as err:  # reported; the others go on
                print(f"{target.text}: FAILED ({failure(err)})")
                errors.append(f"{target.text}: {failure(err)}")
            continue
        _warm_module([n for n in names if n not in warmed], platform, errors)
        warmed.update(names)
        print(f"{target.text}: {plural(len(names), 'primitive')} "
              f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    for line in errors:
        print(f"polykernel cache warm: error: {line}", file=sys.stderr)
    return 1 if errors else 0
