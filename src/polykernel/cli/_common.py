"""What every ``polykernel`` sub-command shares: the error type and argument types.

This module is the bottom of the CLI package: sub-command modules import from it,
and it imports nothing from them, so the imports only point one way.
"""

from __future__ import annotations

import argparse

__all__ = ["CliError", "csv_list", "nonneg_int", "pos_int", "suffixed"]


class CliError(Exception):
    """A runtime failure the CLI reports as one line and exit code 1."""


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
