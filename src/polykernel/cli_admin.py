"""``polykernel cache`` and ``polykernel defaults``: housekeeping sub-commands."""

from __future__ import annotations

from typing import Any

__all__ = ["cmd_cache", "cmd_defaults"]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover - loop always returns


def cmd_cache(args: Any) -> int:
    """Handler of ``polykernel cache info|clear|prune --max-bytes N``."""
    from .native import cache

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


def cmd_defaults(args: Any) -> int:
    """Handler of ``polykernel defaults show|clear [NAME ...]``."""
    from .tuned_defaults import clear_defaults, defaults_path, load_defaults

    if args.action == "show":
        data = load_defaults()
        print(f"tuned defaults file: {defaults_path()}")
        if not data:
            print("(no persisted defaults)")
        for name in sorted(data):
            per = ", ".join(f"{p}={b}" for p, b in sorted(data[name].items()))
            print(f"{name}: {per}")
        return 0
    removed = clear_defaults(args.names or None)
    missing = sorted(set(args.names) - set(removed))
    print(f"cleared defaults of {len(removed)} primitives")
    if missing:
        from .cli import CliError

        raise CliError(f"no persisted defaults for: {', '.join(missing)}")
    return 0
