"""``polykernel cache info|clear|prune|warm``: the on-disk cache of every backend."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import nonneg_int, plural
from .warm import add_warm_args, cmd_warm

__all__ = ["cmd_cache", "register"]

# What the entries of each cache section are (a section not listed: its name).
_TITLES = {
    "native": "native libs",
    "numba": "numba handlers",
    "warp": "warp objects",
    "gpu": "gpu kernels",
    "numba_cuda": "cuda callables",
}


def days(text: str) -> float:
    """``argparse`` type: a non-negative number of days (``1.5`` allowed)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(
            f"expected a number of days >= 0, got {text!r}"
        )
    return value


def register(sub: Any, common: Any) -> None:
    """Add the ``cache`` sub-command to ``sub``."""
    p = sub.add_parser("cache", parents=[common], help="inspect or empty the cache")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    acts.add_parser("info", parents=[common], help="size, location and entries")
    acts.add_parser("clear", parents=[common], help="delete every cache entry")
    prune = acts.add_parser(
        "prune",
        parents=[common],
        help="evict entries unused for --max-age days, then the least recently "
        "used until the cache holds at most --max-bytes",
    )
    prune.add_argument("--max-bytes", type=nonneg_int, metavar="N")
    prune.add_argument("--max-age", type=days, metavar="DAYS")
    prune.set_defaults(prune_parser=prune)
    warm = acts.add_parser(
        "warm",
        parents=[common],
        help="build the kernels of modules' primitives (or of a function) into the "
        "cache, ahead of a job",
    )
    add_warm_args(warm)
    p.set_defaults(handler=cmd_cache)


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover - loop always returns


def cmd_cache(args: Any) -> int:
    """Handler of ``polykernel cache info|clear|prune``."""
    from ..cache import admin as cache_admin

    if args.action == "warm":
        return cmd_warm(args)
    if args.action == "info":
        info = cache_admin.info()
        if info.get("problem"):
            state = f" ({info['problem']})"
        else:
            state = "" if info.get("exists") else " (does not exist yet)"
        print(f"cache root   {info['root']}{state}")
        print(f"size         {_size(info['bytes'])} in {plural(info['files'], 'file')}")
        for name, sec in info["sections"].items():
            if sec["entries"]:
                title = _TITLES.get(name, name)
                count = plural(sec["entries"], "entry", "entries")
                print(f"{title:<12} {count} ({_size(sec['bytes'])})")
        for name, sub in sorted(info.get("subdirs", {}).items()):
            if not sub["files"]:
                continue
            files = plural(sub["files"], "file")
            print(f"  {name:<20} {_size(sub['bytes']):>10}  {files}")
        cap = cache_admin.max_bytes_from_env()
        if cap is not None:
            print(f"size cap     {_size(cap)} (${cache_admin.MAX_BYTES_ENV})")
    elif args.action == "clear":
        print(f"cleared {_size(cache_admin.clear())}")
    else:
        if args.max_bytes is None and args.max_age is None:
            args.prune_parser.error("give --max-bytes N and/or --max-age DAYS")
        max_age = None if args.max_age is None else args.max_age * 86400.0
        freed = cache_admin.prune(max_bytes=args.max_bytes, max_age=max_age)
        print(f"pruned {_size(freed)}")
    return 0
