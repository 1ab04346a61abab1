"""What a command imports: ``--module`` values and ``cache warm`` targets.

One place decides how a module name or a ``.py`` file is read, imported and
reported, so ``list``, ``benchmark``, ``check`` and ``cache warm`` behave the same:

| a target that... | exit code |
|---|---|
| is malformed (``.``, ``.mod``, ``mod.``, ``:f``, ``mod:``, ``a b``) | 2 |
| does not exist (no such module or file) | 2 |
| calls ``sys.exit`` while being imported | 2 |
| raises while being imported (what it imports missing included) | 1 |

A ``.py`` file is imported from its path (``importlib.util.spec_from_file_location``),
never found on ``sys.path``, so ``shadow/json.py`` is that file and not the standard
library's ``json``. It is imported under its own name (``ops`` for ``mylib/ops.py``)
when that name is free or already names this file — a kernel's identity in the cache
includes its module's name, so a job importing ``ops`` finds what was built — and
under a name of its own (``_polykernel_file_json_<digest>``) when another module
holds it. Its folder is appended to ``sys.path`` so it can import its siblings.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import keyword
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ._common import CliError, CliUsageError

__all__ = ["Target", "import_module", "parse_target"]


@dataclass(frozen=True)
class Target:
    """A parsed target: ``module`` (a dotted name or a ``.py`` path) and, for
    ``module:function``, the function's name."""

    text: str
    module: str
    function: str | None = None

    @property
    def is_file(self) -> bool:
        return self.module.endswith(".py")


def _identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def parse_target(text: str, option: str, functions: bool = False) -> Target:
    """Read ``text`` as a module name or ``.py`` path (``functions``: or either,
    then ``:function``). Nothing is imported.

    Raises:
        CliUsageError: ``text`` is malformed, or names a file that does not exist.
    """
    module, function = text, None
    if functions and ":" in text and not Path(text).is_file():
        module, _, function = text.rpartition(":")
    shape = "module, file.py or module:function" if functions else "module or file.py"
    if function is not None and not _identifier(function):
        raise CliUsageError(
            f"{option} {text!r}: {function!r} is not a function name; give "
            f"{shape} (e.g. mylib.ops:warm_up)."
        )
    if module.endswith(".py"):
        path = Path(module)
        if not path.is_file():
            what = "is not a file" if path.exists() else "no such file"
            raise CliUsageError(
                f"{option} {text!r}: {what}: {module}; give the path of a .py file "
                "or a dotted module name."
            )
    elif not module or not all(_identifier(p) for p in module.split(".")):
        raise CliUsageError(
            f"{option} {text!r}: not a module name or a .py file; give {shape} "
            "(e.g. mylib.ops, path/to/ops.py). Relative names (.mod) are not "
            "importable here."
        )
    return Target(text, module, function)


def import_module(target: Target) -> ModuleType:
    """Import ``target``'s module (a dotted name or a ``.py`` file) and return it.

    Raises:
        CliUsageError: no such module, or it calls ``sys.exit`` while imported.
        CliError: it raises while being imported (names it and the cause).
    """
    mod = target.module
    try:
        if target.is_file:
            return _import_file(Path(mod))
        return importlib.import_module(mod)
    except SystemExit as exc:  # the module ran a script's `sys.exit(...)`
        raise CliUsageError(
            f"module {mod!r} called sys.exit({exc.code!r}) while being imported. "
            "Pass a module that only defines and registers primitives (guard "
            "script code with `if __name__ == '__main__':`)."
        ) from None
    except Exception as err:
        # A module that does not exist is a bad argument (exit 2); one that exists
        # but fails while importing, what it imports included, a failure (exit 1).
        gone = getattr(err, "name", None) or "?"
        missing = isinstance(err, ModuleNotFoundError) and (
            mod == gone or mod.startswith(gone + ".")
        )
        error = CliUsageError if missing and not target.is_file else CliError
        text = " ".join(str(err).split())
        raise error(
            f"cannot import module {mod!r} ({type(err).__name__}: {text}). "
            + (
                "Check the name and that it is importable (PYTHONPATH)."
                if missing
                else "Fix the module; --debug shows the traceback."
            )
        ) from err


def _import_file(path: Path) -> ModuleType:
    path = path.resolve()
    name = _file_module_name(path)
    if name in sys.modules:  # this very file, imported already
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py always loads
        raise ImportError(f"not a Python file: {path}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # its siblings importable, never shadowing others
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _file_module_name(path: Path) -> str:
    """The file's own name when free or already this file's, else a unique one."""
    stem = path.stem
    if _identifier(stem):
        held = sys.modules.get(stem)
        if held is not None:
            if _same_file(getattr(held, "__file__", None), path):
                return stem
        else:
            try:
                spec = importlib.util.find_spec(stem)
            except (ImportError, ValueError):
                spec = None
            if spec is None or _same_file(spec.origin, path):
                return stem
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    safe = re.sub(r"\W", "_", stem)
    return f"_polykernel_file_{safe}_{digest}"


def _same_file(origin: Any, path: Path) -> bool:
    try:
        return origin is not None and Path(origin).resolve() == path
    except (OSError, TypeError, ValueError):
        return False
