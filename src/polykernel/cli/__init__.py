"""The ``polykernel`` command line: ``info | list | benchmark | check | cache |
defaults``.

One module per sub-command, each with ``register(subparsers, common)`` and its
handler; :mod:`.main` builds the parser from them and runs the chosen handler.
"""

from ._common import CliError as CliError
from .main import build_parser as build_parser, main as main

__all__ = ["CliError", "build_parser", "main"]
