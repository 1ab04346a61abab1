"""``polykernel cache warm TARGET ...``: build kernels into the cache ahead of a job.

A TARGET is a module (``mylib.ops``) or a ``.py`` file (imported under its own name,
its folder on the path) whose primitives are warmed —
every backend registered for the platform, on every configuration of the
primitive's benchmark data (``def_benchmark_data``), called once through its call
function (``def_call``) — or ``module:function`` / ``file.py:function``, a function
taking no argument that runs the kernels itself. Each kernel built on the way lands
in the writable cache (``POLYKERNEL_CACHE_DIR``), so a job (or a read-only tier made
from it, ``POLYKERNEL_CACHE_READONLY``) starts with a ready cache. A kernel that
fails to build is reported and the others go on; the exit code is 1 then.
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path
from typing import Any

from .. import registry
from ._common import CliUsageError

__all__ = ["add_warm_args", "cmd_warm", "warm_primitive"]


def add_warm_args(p: Any) -> None:
    """Arguments of ``polykernel cache warm``."""
    p.add_argument("targets", nargs="+", metavar="TARGET",
                   help="module, file.py, or module:function (repeatable)")  # fmt: skip
    p.add_argument("--platform", default=None, help="platform to build for "
                   "(default: JAX's default backend)")  # fmt: skip


def warm_primitive(kernel: Any, platform: str) -> list[tuple[str, str, str | None]]:
    """Run every (config, backend) of ``kernel`` once; ``(backend, config, error)``."""
    import jax

    from ..benchmark.runner import plan_benchmark

    plan = plan_benchmark(kernel, platform=platform)
    device = jax.devices(platform)[0]
    done = []
    for cfg in plan.configs:
        args = cfg.put_args(device).args
        for backend in plan.backends:
            try:
                fn = jax.jit(lambda *a, b=backend, kw=cfg.kernel_kwargs:
                             kernel.call(*a, backend=b, **kw))  # fmt: skip
                jax.block_until_ready(fn(*args))
                done.append((backend, cfg.name, None))
            except Exception as err:  # reported; the other kernels still warm
                done.append((backend, cfg.name, f"{type(err).__name__}: {err}"))
    return done


def _import(target: str) -> Any:
    """Import a module, or a ``.py`` file under its own name (its folder on the
    path), as the job will: a kernel's identity includes its module's name."""
    path = Path(target)
    if target.endswith(".py"):
        if not path.is_file():
            raise CliUsageError(f"no such file: {target}")
        sys.path.insert(0, str(path.resolve().parent))
        target = path.stem
    try:
        return importlib.import_module(target)
    except ImportError as err:
        raise CliUsageError(f"cannot import module {target!r}: {err}") from err


def _function(target: str) -> Any:
    where, _, name = target.rpartition(":")
    module = _import(where)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise CliUsageError(
            f"{target!r}: module {where!r} has no function {name!r}; pass "
            f"module:function naming a function that takes no argument."
        )
    return fn


def cmd_warm(args: Any) -> int:
    """Handler of ``polykernel cache warm``."""
    import jax

    platform = args.platform or jax.default_backend()
    failures = 0
    for target in args.targets:
        start = time.perf_counter()
        if ":" in target and not Path(target).exists():
            _function(target)()
            print(f"{target}: ran ({time.perf_counter() - start:.1f} s)")
            continue
        before = set(registry.get_all_primitive_names())
        _import(target)
        names = sorted(set(registry.get_all_primitive_names()) - before)
        for name in names:
            kernel = registry.get_primitive(name)
            if kernel.benchmark_data_function is None or kernel.call_function is None:
                print(f"{name}: skipped (no def_benchmark_data / def_call)")
                continue
            for backend, config, error in warm_primitive(kernel, platform):
                mark = "ready" if error is None else f"FAILED ({error})"
                print(f"{name} {backend} {config}: {mark}")
                failures += error is not None
        print(f"{target}: {len(names)} primitive(s) "
              f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    return 1 if failures else 0
