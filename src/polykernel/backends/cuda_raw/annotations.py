"""Find the functions to export from ``// @pk name`` / ``// @BE name`` comments.

When ``functions`` is omitted, every function marked by a comment line

    // @pk scale                  (polykernel's spelling)
    // @BE scale                  (the reference's)
    // @BE scale arg ret stream   (with an explicit arg_spec after the name)

is exported; without tokens its arg_spec is inferred from the C++ signature.
A function produced by a token-pasting macro has no literal ``void name(...)`` in
the source; its parameters are then read from the ``#define`` of the macro invoked
on the first code line after the comment.
"""

from __future__ import annotations

import re

from ...errors import KernelRegistrationError

__all__ = ["discover", "macro_parameters"]

_MARK = re.compile(r"//\s*@(?:pk|BE)\s+([A-Za-z_]\w*)([^\n]*)")


def discover(module: str, source: str) -> dict[str, list[str] | None]:
    """``{name: tokens}`` for every marked function (``None``: infer the tokens).

    Raises:
        KernelRegistrationError: no mark at all, or one name marked twice.

    Example:
        >>> from polykernel.backends.cuda_raw.annotations import discover
        >>> discover("m", "// @BE f arg ret\\nvoid f(...);\\n// @pk g\\n")
        {'f': ['arg', 'ret'], 'g': None}
    """
    found: dict[str, list[str] | None] = {}
    for m in _MARK.finditer(source):
        name, rest = m.group(1), m.group(2).split()
        if name in found:
            raise KernelRegistrationError(
                f"polykernel.native module '{module}': function '{name}' is marked "
                "twice ('// @pk' / '// @BE'); keep one mark per exported function."
            )
        found[name] = rest or None
    if not found:
        raise KernelRegistrationError(
            f"polykernel.native module '{module}': `functions` was not given and no "
            "'// @pk <name>' (or '// @BE <name>') comment marks a function to export; "
            "add one above each function, or pass functions=['name', ...]."
        )
    return found


def macro_parameters(source: str, fname: str) -> list[str] | None:
    """Parameters of ``fname`` when a macro marked ``// @pk|@BE fname`` defines it."""
    mark = re.search(rf"//\s*@(?:pk|BE)\s+{re.escape(fname)}\b[^\n]*\n", source)
    if mark is None:
        return None
    macro = None
    for line in source[mark.end() :].splitlines():
        line = line.strip()
        if line and not line.startswith("//"):
            call = re.match(r"([A-Za-z_]\w*)\s*\(", line)
            macro = call.group(1) if call else None
            break
    define = macro and re.search(rf"#\s*define\s+{re.escape(macro)}\s*\(", source)
    if not define:
        return None
    body = []
    for line in source[define.start() :].splitlines():
        body.append(line.rstrip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            break
    sig = re.search(r"\bvoid\s+[\w#]+\s*\(([^)]*)\)", " ".join(body))
    if sig is None:
        return None
    text = " ".join(sig.group(1).split())
    return [] if text in ("", "void") else [p.strip() for p in text.split(",")]
