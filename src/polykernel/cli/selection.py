"""Which primitives a command sees: ``NAME ...``, ``--tags``, ``--module``.

Primitives register themselves when their module is imported, so a command first
imports ``polykernel.catalog`` (the bundled demo set, when present) and every
``--module`` given (a dotted module name or a path to a ``.py`` file).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from .. import registry
from ._common import CliError, CliUsageError

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


def _import_file(path: Path) -> None:
    name = f"_polykernel_cli_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def import_modules(modules: list[str], catalog: bool = True) -> None:
    """Import the catalog (if installed and wanted) and each of ``modules``.

    Raises:
        CliError: a module fails while being imported (names it and the cause).
        CliUsageError: a module or file does not exist, or calls ``sys.exit``
            while being imported.
    """
    wanted = list(modules)
    if catalog and importlib.util.find_spec(CATALOG) is not None:
        wanted.insert(0, CATALOG)
    for mod in wanted:
        try:
            path = Path(mod)
            if mod.endswith(".py"):
                if not path.is_file():
                    raise ImportError(f"no such file: {path}")
                _import_file(path)
            else:
                importlib.import_module(mod)
        except Exception as err:
            # A module or file that does not exist is a bad argument (exit 2); one
            # that exists but fails while importing is a runtime failure (exit 1).
            gone = getattr(err, "name", None) or "?"
            missing = str(err).startswith("no such file") or (
                isinstance(err, ModuleNotFoundError)
                and (mod == gone or mod.startswith(gone + "."))
            )
            error = CliUsageError if missing else CliError
            raise error(
                f"cannot import module {mod!r} ({type(err).__name__}: {err}). "
                "Check the name and that it is importable (PYTHONPATH)."
            ) from err
        except SystemExit as exc:  # the module ran a script's `sys.exit(...)`
            raise CliUsageError(
                f"module {mod!r} called sys.exit({exc.code!r}) while being imported. "
                "Pass a module that only defines and registers primitives (guard "
                "script code with `if __name__ == '__main__':`)."
            ) from None


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
