"""The ``polykernel`` command: ``info | list | benchmark | cache | defaults``.

Exit codes: 0 success, 1 a runtime failure (an import or benchmark error; with
``--strict`` also a failed backend or an output mismatch), 2 a usage error. Errors
are printed to stderr as one line; ``--debug`` adds the traceback.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence

from ._version import __version__

__all__ = ["CliError", "build_parser", "main"]


class CliError(Exception):
    """A runtime failure the CLI reports as one line and exit code 1."""


def _add_info(sub, common) -> None:
    from . import cli_info

    p = sub.add_parser("info", parents=[common], help="versions, devices, toolchains")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=cli_info.cmd_info)


def _add_list(sub, common) -> None:
    from . import cli_bench

    p = sub.add_parser("list", parents=[common], help="list registered primitives")
    cli_bench.add_selection_args(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(handler=cli_bench.cmd_list)


def _add_benchmark(sub, common) -> None:
    from . import cli_bench

    p = sub.add_parser(
        "benchmark", parents=[common], help="benchmark registered primitives"
    )
    cli_bench.add_selection_args(p)
    p.add_argument("--platform", default="cpu", choices=["cpu", "gpu", "tpu"])
    p.add_argument("--n-warmup", type=_nonneg_int, default=5, metavar="N")
    p.add_argument("--n-runs", type=_pos_int, default=20, metavar="N")
    p.add_argument("--n-batch-per-run", type=_pos_int, default=1, metavar="N")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol", type=float, default=1e-3)
    p.add_argument(
        "--backends", type=_csv, default=None, metavar="A,B", help="only these backends"
    )
    p.add_argument(
        "--output",
        "-o",
        type=_suffixed(".json", ".csv"),
        metavar="FILE",
        help="save results (.json/.csv)",
    )
    p.add_argument(
        "--plot", type=_suffixed(".png"), metavar="FILE.png", help="save a bar chart"
    )
    p.add_argument(
        "--save-defaults",
        action="store_true",
        help="persist the fastest correct backend per primitive",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 if a backend fails or outputs disagree",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.set_defaults(handler=cli_bench.cmd_benchmark)


def _add_cache(sub, common) -> None:
    from . import cli_admin

    p = sub.add_parser("cache", parents=[common], help="inspect or empty the cache")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    acts.add_parser("info", parents=[common], help="size and location")
    acts.add_parser("clear", parents=[common], help="delete every cache entry")
    prune = acts.add_parser("prune", parents=[common], help="evict oldest entries")
    prune.add_argument("--max-bytes", type=_nonneg_int, required=True, metavar="N")
    p.set_defaults(handler=cli_admin.cmd_cache)


def _add_defaults(sub, common) -> None:
    from . import cli_admin

    p = sub.add_parser("defaults", parents=[common], help="persisted tuned defaults")
    acts = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    acts.add_parser("show", parents=[common], help="print the persisted defaults")
    clear = acts.add_parser("clear", parents=[common], help="forget defaults")
    clear.add_argument("names", nargs="*", metavar="NAME", help="default: all")
    p.set_defaults(handler=cli_admin.cmd_defaults)


def _pos_int(text: str) -> int:
    return _int_at_least(text, 1)


def _nonneg_int(text: str) -> int:
    return _int_at_least(text, 0)


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}")
    return value


def _suffixed(*suffixes: str):
    def check(text: str) -> str:
        if not text.lower().endswith(suffixes):
            raise argparse.ArgumentTypeError(
                f"{text!r} must end in {' or '.join(suffixes)}"
            )
        return text

    return check


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``polykernel`` command."""
    common = argparse.ArgumentParser(add_help=False)
    # SUPPRESS keeps a sub-command's default from overwriting a --debug given
    # before the sub-command name.
    common.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show tracebacks",
    )
    parser = argparse.ArgumentParser(
        prog="polykernel",
        description="One JAX primitive, many kernel technologies.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_info, _add_list, _add_benchmark, _add_cache, _add_defaults):
        add(sub, common)
    return parser


def _one_line(err: BaseException) -> str:
    # str(KeyError) quotes its message; show the message itself.
    raw = err.args[0] if isinstance(err, KeyError) and err.args else err
    text = " ".join(str(raw).split())
    return text or type(err).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    Example:
        >>> main(["defaults", "show"])  # doctest: +SKIP
        0
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version (0) or usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("polykernel: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if args.debug:
            traceback.print_exc()
        where = " ".join(filter(None, [args.command, getattr(args, "action", None)]))
        print(f"polykernel {where}: error: {_one_line(err)}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover - `python -m polykernel.cli`
    sys.exit(main())
