"""``normalize_tokens``: accept the arg_spec spellings the reference allows.

=================================  ==================================
alias                              canonical token
=================================  ==================================
``"args"``                         ``"arg"``
``"rets"``                         ``"ret"``
``"ctx.stream"``                   ``"stream"``
``"attrs.<name>"``                 ``"attr.<name>"``
``"attrs.<name>:<type>"``          ``"attr.<name>:<type>"``
=================================  ==================================

Every other token, including anything that is not a string, is returned unchanged,
so the spec parser still reports it with its own message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...errors import KernelTypeError

__all__ = ["normalize_tokens"]

_ALIASES = {"args": "arg", "rets": "ret", "ctx.stream": "stream"}
_ATTRS = re.compile(r"^attrs\.(\w+(?::\w+)?)$")


def normalize_tokens(tokens: Iterable[object]) -> list:
    """Map arg_spec aliases to canonical tokens; leave everything else as is.

    Example:
        >>> from polykernel import normalize_tokens
        >>> normalize_tokens(["args", "rets", "ctx.stream", "attrs.alpha"])
        ['arg', 'ret', 'stream', 'attr.alpha']
    """
    if isinstance(tokens, str):
        tokens = [tokens]  # one token, not its characters
    if not isinstance(tokens, Iterable):
        raise KernelTypeError(
            "normalize_tokens: tokens must be a list of arg_spec tokens such as "
            f"['arg', 'ret'], got {type(tokens).__name__} {tokens!r}."
        )
    result = []
    for token in tokens:
        if isinstance(token, str):
            stripped = token.strip()
            if stripped in _ALIASES:
                token = _ALIASES[stripped]
            elif match := _ATTRS.match(stripped):
                token = f"attr.{match.group(1)}"
        result.append(token)
    return result
