"""``polykernel defaults show|clear [NAME ...]``: persisted tuned defaults."""

from __future__ import annotations

from typing import Any

from ._common import CliError, plural

__all__ = ["cmd_defaults", "register"]


def register(sub: Any, common: Any) -> None:
    """Add the ``defaults`` sub-command to ``sub``."""
    p = sub.add_parser("defaults", parents=[common], help="persisted tuned defaults")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    acts.add_parser("show", parents=[common], help="print the persisted defaults")
    clear = acts.add_parser("clear", parents=[common], help="forget defaults")
    clear.add_argument("names", nargs="*", metavar="NAME", help="default: all")
    p.set_defaults(handler=cmd_defaults)


def cmd_defaults(args: Any) -> int:
    """Handler of ``polykernel defaults show|clear [NAME ...]``."""
    from ..settings.tuned_defaults import clear_defaults, defaults_path, load_defaults

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
    print(f"cleared defaults of {plural(len(removed), 'primitive')}")
    if missing:
        raise CliError(f"no persisted defaults for: {', '.join(missing)}")
    return 0
