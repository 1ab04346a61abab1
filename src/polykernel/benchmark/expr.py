"""Safe row filters: ``compare_by="backend == 'numba' and platform == 'cpu'"``.

The reference evaluates such strings with ``eval``, which runs any code a string
holds. Here the string is parsed with :mod:`ast` and only a small whitelist is
interpreted by hand: column names, literal constants (and tuples/lists/sets of them),
comparisons, ``and``/``or``/``not`` and unary minus. Nothing is ever compiled or
executed, so ``__import__('os')``, attribute access and calls are refused up front.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ..errors import BenchmarkValueError

__all__ = ["RowFilter", "compile_filter"]

# Long and deep enough for any hand-written filter, small enough that parsing and
# the recursive interpreter below stay cheap and far from Python's recursion limit.
MAX_LENGTH = 1000
MAX_DEPTH = 50

_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_REFUSED_NAMES = {
    ast.Call: "a function call",
    ast.Attribute: "attribute access",
    ast.Subscript: "indexing",
    ast.BinOp: "arithmetic",
    ast.Lambda: "a lambda",
    ast.NamedExpr: "an assignment (:=)",
    ast.IfExp: "a conditional expression",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a comprehension",
    ast.JoinedStr: "an f-string",
    ast.Starred: "unpacking (*)",
    ast.Dict: "a dict literal",
}
_ALLOWED_HINT = (
    "allowed: column names, literal numbers/strings/True/False/None (and tuples or "
    "lists of them), ==, !=, <, <=, >, >=, in, not in, is, is not, and, or, not"
)
RowFilter = Callable[[Mapping[str, Any]], bool]


def _refuse(text: str, node: ast.AST, where: str) -> ValueError:
    what = _REFUSED_NAMES.get(type(node), f"'{type(node).__name__}'")
    return ValueError(
        f"{where}: the expression {text!r} uses {what}, which is not allowed; "
        f"{_ALLOWED_HINT}."
    )


def _check(
    node: ast.AST, text: str, columns: Collection[str], where: str, depth: int = 0
) -> None:
    if depth > MAX_DEPTH:
        raise BenchmarkValueError(
            f"{where}: the expression {text!r} nests more than {MAX_DEPTH} levels "
            "deep; simplify it or pass a callable row -> bool."
        )
    if isinstance(node, ast.Name):
        if node.id not in columns:
            raise BenchmarkValueError(
                f"{where}: the expression {text!r} names {node.id!r}, which is not a "
                f"column of this result; columns: {sorted(columns)}."
            )
        return
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, str | int | float | bool | type(None)):
            raise _refuse(text, node, where)
        return
    if isinstance(node, ast.BoolOp | ast.Compare | ast.Tuple | ast.List | ast.Set):
        children = ast.iter_child_nodes(node)
        for child in children:
            if isinstance(child, ast.boolop | ast.cmpop | ast.expr_context):
                continue
            _check(child, text, columns, where, depth + 1)
        return
    if isinstance(node, ast.UnaryOp) and isinstance(
        node.op, ast.Not | ast.USub | ast.UAdd
    ):
        _check(node.operand, text, columns, where, depth + 1)
        return
    raise _refuse(text, node, where)


def _eval(node: ast.AST, row: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return row.get(node.id)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_eval(e, row) for e in node.elts)
    if isinstance(node, ast.Set):
        return {_eval(e, row) for e in node.elts}
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, row) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, row)
        if isinstance(node.op, ast.Not):
            return not value
        return -value if isinstance(node.op, ast.USub) else +value
    assert isinstance(node, ast.Compare)
    left = _eval(node.left, row)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _eval(right_node, row)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def compile_filter(
    text: str, columns: Collection[str], where: str = "compare_by"
) -> RowFilter:
    """Parse ``text`` once and return ``row -> bool``.

    A comparison that Python cannot make for some row (``None < 1``, a string
    against a number) does not match that row, as with the reference.

    Raises:
        ValueError: the text is not an expression, is too long, names an unknown
            column, or uses anything outside the whitelist (calls, attributes, ...).

    Example:
        >>> from polykernel.benchmark.expr import compile_filter
        >>> keep = compile_filter("backend == 'numba'", ["backend"])
        >>> keep({"backend": "numba"}), keep({"backend": "warp"})
        (True, False)
    """
    if len(text) > MAX_LENGTH:
        raise BenchmarkValueError(
            f"{where}: the expression is {len(text)} characters long; the limit is "
            f"{MAX_LENGTH}. Pass a callable row -> bool for complex selections."
        )
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise BenchmarkValueError(
            f"{where}: {text!r} is not a valid expression ({err.msg}); write e.g. "
            "\"backend == 'numba'\"."
        ) from err
    _check(tree.body, text, columns, where)

    def keep(row: Mapping[str, Any]) -> bool:
        try:
            return bool(_eval(tree.body, row))
        except (TypeError, ValueError):  # e.g. None < 1, or an array's truth value
            return False

    return keep
