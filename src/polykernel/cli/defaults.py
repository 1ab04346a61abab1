"""``polykernel defaults show|clear [NAME ...]``: an alias of ``polykernel tune``.

Saved defaults (``polykernel benchmark --save-defaults``) are entries of the one
tuned table now; ``defaults show`` lists them as ``tune --show`` does (saved
defaults only) and ``defaults clear`` forgets them — and the old ``defaults``
file's pairs — as ``tune --clear`` does. Both say so on stderr.
"""

from __future__ import annotations

import sys
from typing import Any

from ..dispatch.records import Scope

__all__ = ["cmd_defaults", "register"]


def register(sub: Any, common: Any) -> None:
    """Add the ``defaults`` sub-command to ``sub``."""
    p = sub.add_parser(
        "defaults",
        parents=[common],
        help="saved defaults (an alias of `polykernel tune --show/--clear`)",
    )
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = acts.add_parser("show", parents=[common], help="list the saved defaults")
    show.add_argument("names", nargs="*", metavar="NAME", help="default: all")
    clear = acts.add_parser("clear", parents=[common], help="forget saved defaults")
    clear.add_argument("names", nargs="*", metavar="NAME", help="default: all")
    p.set_defaults(handler=cmd_defaults)


def cmd_defaults(args: Any) -> int:
    """Handler of ``polykernel defaults show|clear [NAME ...]``."""
    from .tables import show_entries
    from .tune import clear

    print(
        f"polykernel defaults {args.action}: an alias of `polykernel tune "
        f"--{args.action}` (saved defaults are entries of the tuned table).",
        file=sys.stderr,
    )
    if args.action == "show":
        show_entries(args.names, Scope.SAVED)
        return 0
    return clear(args.names, Scope.SAVED)
