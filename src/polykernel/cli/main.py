"""Parse ``polykernel`` arguments and run the chosen sub-command's handler.

Exit codes: 0 success, 1 a runtime failure (an import or benchmark error; with
``--strict`` also a failed backend or an output mismatch; user code calling
``sys.exit`` while the command runs), 2 a usage error (from argparse, or found
later: a malformed or missing ``--module``/target, one that calls ``sys.exit`` while
being imported, an unknown ``--backends`` name, an unwritable ``--output`` path).
Errors are printed to stderr as one line; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

from .._version import __version__
from . import benchmark, cache, check, defaults, info, listing, tune
from ._common import CliUsageError, failure

__all__ = ["build_parser", "main"]


class _ParserExit(SystemExit):
    """An exit of our argument parsers (``--help``, ``--version``, a usage error
    reported by ``parser.error``), told apart from user code's ``sys.exit``."""


class _Parser(argparse.ArgumentParser):
    """The ``polykernel`` parser (its sub-parsers are of this class too)."""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            self._print_message(message, sys.stderr)
        raise _ParserExit(status)


# One module per sub-command, in the order `polykernel --help` lists them.
_COMMANDS = (info, listing, benchmark, check, tune, cache, defaults)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``polykernel`` command."""
    common = _Parser(add_help=False)
    # SUPPRESS keeps a sub-command's default from overwriting a --debug given
    # before the sub-command name.
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks",
    )
    parser = _Parser(
        prog="polykernel",
        description="One JAX primitive, many kernel technologies.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in _COMMANDS:
        command.register(sub, common)
    return parser


def _one_line(err: BaseException) -> str:
    # str(KeyError) quotes its message; show the message itself.
    raw = err.args[0] if isinstance(err, KeyError) and err.args else err
    text = " ".join(str(raw).split())
    return text or type(err).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    Example:
        >>> from polykernel.cli.main import main
        >>> main(["--version"])
        0.1.0.dev0
        0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    # The command line as given: `benchmark --processes` runs it again.
    args.argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("polykernel: interrupted", file=sys.stderr)
        return 130
    except _ParserExit as exc:  # a sub-parser's .error(): usage printed already
        return exc.code if isinstance(exc.code, int) else 2
    except SystemExit as exc:  # user code (a data or call function) ran sys.exit
        if args.debug:
            traceback.print_exc()
        print(
            f"polykernel {_where(args)}: error: user code {failure(exc)} while the "
            "command ran; nothing after it was done. Remove the sys.exit call (or "
            "guard it with `if __name__ == '__main__':`).",
            file=sys.stderr,
        )
        return 1
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        print(f"polykernel {_where(args)}: error: {_one_line(err)}", file=sys.stderr)
        return 2 if isinstance(err, CliUsageError) else 1


def _where(args: argparse.Namespace) -> str:
    return " ".join(filter(None, [args.command, getattr(args, "action", None)]))
