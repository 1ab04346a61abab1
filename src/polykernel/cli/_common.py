"""What every ``polykernel`` sub-command shares: the error type and argument types.

This module is the bottom of the CLI package: sub-command modules import from it,
and it imports nothing from them, so the imports only point one way.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

__all__ = [
    "CliError",
    "CliUsageError",
    "check_writable",
    "csv_list",
    "failure",
    "nonneg_int",
    "plural",
    "pos_int",
    "suffixed",
]


class CliError(Exception):
    """A runtime failure the CLI reports as one line and exit code 1."""


class CliUsageError(CliError):
    """Arguments that cannot work (exit code 2), found after parsing: a ``--module``
    that exits, a backend no selected primitive has, an unwritable output path."""


def failure(err: BaseException) -> str:
    """One line saying what ``err`` was: ``"ValueError: bad data"``, or for a
    ``SystemExit`` (user code calling ``sys.exit``) ``"called sys.exit(0)"``."""
    if isinstance(err, SystemExit):
        return f"called sys.exit({err.code!r})"
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def plural(n: int, word: str, words: str | None = None) -> str:
    """``n`` and the noun it counts: ``plural(1, "entry", "entries")`` is
    ``"1 entry"``, ``plural(2, "run")`` is ``"2 runs"``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"


def pos_int(text: str) -> int:
    """``argparse`` type: an integer >= 1."""
    return _int_at_least(text, 1)


def nonneg_int(text: str) -> int:
    """``argparse`` type: an integer >= 0."""
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
    return value


def suffixed(*suffixes: str):
    """``argparse`` type: a file name ending in one of ``suffixes``."""

    def check(text: str) -> str:
        if not text.lower().endswith(suffixes):
            raise argparse.ArgumentTypeError(
                f"{text!r} must end in {' or '.join(suffixes)}"
            )
        return text

    return check


def csv_list(text: str) -> list[str]:
    """``argparse`` type: ``"a, b,c"`` -> ``["a", "b", "c"]``."""
    return [t.strip() for t in text.split(",") if t.strip()]


def check_writable(path: str, option: str) -> None:
    """Fail early (before a long run) when ``path`` cannot be written.

    Missing parent directories are fine (they are created on save) as long as
    the nearest existing ancestor is a directory we may write to.

    Raises:
        CliUsageError: ``path`` is a directory, or its directory cannot be
            created or written.
    """
    target = Path(path).expanduser()
    if target.is_dir():
        raise CliUsageError(f"{option} {path}: is a directory; give a file name.")
    ancestor = target.parent.absolute()
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise CliUsageError(
            f"{option} {path}: cannot create it because '{ancestor}' is not a "
            "directory. Choose another path."
        )
    writable = os.access(ancestor, os.W_OK | os.X_OK)
    if not writable or (target.exists() and not os.access(target, os.W_OK)):
        where = f"in '{ancestor}'" if not writable else "on the file"
        raise CliUsageError(
            f"{option} {path}: not writable (no write permission {where}). "
            "Choose a path you can write to."
        )
