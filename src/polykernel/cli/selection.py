"""Which primitives a command sees: ``NAME ...``, ``--tags``, ``--module``.

Primitives register themselves when their module is imported, so a command first
imports ``polykernel.catalog`` (the bundled demo set, when present) and every
``--module`` given (a dotted module name or a path to a ``.py`` file), through
:mod:`.targets`, which ``cache warm`` shares.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from ..core import registry
from ._common import CliUsageError
from .targets import Target, import_module, parse_target

__all__ = ["CATALOG", "add_selection_args", "import_modules", "select"]

CATALOG = "polykernel.catalog"


def add_selection_args(p: Any) -> None:
    """Add the arguments that choose which primitives a command sees."""
    p.add_argument("names", nargs="*", metavar="NAME", help="only these primitives")
    p.add_argument(
        "--tags",
        default="",
        metavar="A,B",
        help="only primitives carrying all these tags",
    )
    p.add_argument(
        "--module",
        "-m",
        action="append",
        default=[],
        metavar="MOD",
        help="import this module (or .py file) first; repeatable",
    )
    p.add_argument("--no-catalog", action="store_true", help=f"do not import {CATALOG}")


def import_modules(modules: list[str], catalog: bool = True) -> None:
    """Import the catalog (if installed and wanted) and each of ``modules``
    (:mod:`.targets`: every ``--module`` is checked before any is imported).

    Raises:
        CliUsageError: a module is malformed or does not exist, or calls
            ``sys.exit`` while being imported.
        CliError: a module fails while being imported (names it and the cause).
    """
    wanted = [parse_target(mod, "--module") for mod in modules]
    if catalog and importlib.util.find_spec(CATALOG) is not None:
        wanted.insert(0, Target(CATALOG, CATALOG))
    for target in wanted:
        import_module(target)


def select(args: Any) -> dict[str, Any]:
    import_modules(args.module, catalog=not args.no_catalog)
    tags = {t.strip() for t in args.tags.split(",") if t.strip()}
    chosen = registry.get_primitives_by_tags(tags)
    for name in args.names:
        try:
            registry.get_primitive(name)
        except KeyError as err:  # an unknown NAME is a bad argument: exit 2
            raise CliUsageError(err.args[0] if err.args else str(err)) from None
    if args.names:
        chosen = {n: k for n, k in chosen.items() if n in args.names}
    return chosen
