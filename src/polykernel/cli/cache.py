"""``polykernel cache info|clear|prune``: the on-disk cache of every backend."""

from __future__ import annotations

from typing import Any

from ._common import nonneg_int

__all__ = ["cmd_cache", "register"]


def register(sub: Any, common: Any) -> None:
    """Add the ``cache`` sub-command to ``sub``."""
    p = sub.add_parser("cache", parents=[common], help="inspect or empty the cache")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    acts.add_parser("info", parents=[common], help="size and location")
    acts.add_parser("clear", parents=[common], help="delete every cache entry")
    prune = acts.add_parser("prune", parents=[common], help="evict oldest entries")
    prune.add_argument("--max-bytes", type=nonneg_int, required=True, metavar="N")
    p.set_defaults(handler=cmd_cache)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover - loop always returns


def cmd_cache(args: Any) -> int:
    """Handler of ``polykernel cache info|clear|prune --max-bytes N``."""
    from ..native import cache

    if args.action == "info":
        info = cache.info()
        state = "" if info.get("exists") else " (does not exist yet)"
        print(f"cache root   {info['root']}{state}")
        print(f"size         {_size(info['bytes'])} in {info['files']} files")
        if "native_entries" in info:
            print(f"native libs  {info['native_entries']} entries")
        for name, sub in sorted(info.get("subdirs", {}).items()):
            if not sub["files"]:
                continue
            print(f"  {name:<20} {_size(sub['bytes']):>10}  {sub['files']} files")
    elif args.action == "clear":
        print(f"cleared {_size(cache.clear())}")
    else:
        print(f"pruned {_size(cache.prune(args.max_bytes))}")
    return 0
