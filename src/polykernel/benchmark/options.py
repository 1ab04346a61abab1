"""The keywords of ``BenchmarkResult.print``/``table``, checked in one place.

Names and defaults are the reference's (``sort_by``, ``group_by``, ``compare_by``,
``highlight_best=True``, ``order_by``, ``speedup_vs``, ``vary_by``) plus our
``baseline`` for the default comparison table.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BenchmarkTypeError, BenchmarkValueError

__all__ = ["PRINT_KEYWORDS", "PrintOptions"]

PRINT_KEYWORDS = (
    "sort_by",
    "group_by",
    "compare_by",
    "highlight_best",
    "order_by",
    "speedup_vs",
    "vary_by",
    "baseline",
)
_COLUMN_LISTS = ("sort_by", "group_by", "order_by", "vary_by")

#: A column name or a list of them, as ``print``/``table`` take it.
Columns = str | list[str] | None


def _as_list(where: str, name: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    ok = isinstance(items, list | tuple) and all(isinstance(v, str) for v in items)
    if not ok or not items:
        raise BenchmarkTypeError(
            f"{where}: {name} must be a column name or a non-empty list of column "
            f"names, got {value!r}."
        )
    return list(items)


def reject_unknown(where: str, unknown: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` naming every keyword ``where`` does not take."""
    if not unknown:
        return
    hints = []
    for name in unknown:
        close = difflib.get_close_matches(name, PRINT_KEYWORDS, n=1)
        hints.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise BenchmarkTypeError(
        f"{where} got unexpected keyword argument(s) {', '.join(hints)}; it takes "
        f"{', '.join(PRINT_KEYWORDS)}."
    )


@dataclass
class PrintOptions:
    """Validated ``print``/``table`` options (column names as lists)."""

    sort_by: list[str] | None = None
    group_by: list[str] | None = None
    compare_by: str | Callable[[dict[str, Any]], bool] | None = None
    highlight_best: bool = True
    order_by: list[str] | None = None
    speedup_vs: str | None = None
    vary_by: list[str] | None = None
    baseline: str | None = None
    where: str = field(default="BenchmarkResult.print", repr=False)

    @classmethod
    def given(
        cls,
        where: str,
        sort_by: Columns,
        group_by: Columns,
        compare_by: Any,
        highlight_best: bool,
        order_by: Columns,
        speedup_vs: str | None,
        vary_by: Columns,
        baseline: str | None,
    ) -> PrintOptions:
        """The options as ``print``/``table`` take them (a column or a list)."""
        given = zip(_COLUMN_LISTS, (sort_by, group_by, order_by, vary_by), strict=True)
        sort, group, order, vary = (_as_list(where, n, v) for n, v in given)
        return cls(sort, group, compare_by, highlight_best, order, speedup_vs, vary,
                   baseline, where=where)  # fmt: skip

    def __post_init__(self) -> None:
        for name in _COLUMN_LISTS:
            setattr(self, name, _as_list(self.where, name, getattr(self, name)))
        cb = self.compare_by
        if cb is not None and not (isinstance(cb, str) or callable(cb)):
            raise BenchmarkTypeError(
                f"{self.where}: compare_by must be an expression string such as "
                f"\"backend == 'numba'\" or a callable row -> bool, got {cb!r}."
            )
        for name in ("speedup_vs", "baseline"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise BenchmarkTypeError(
                    f"{self.where}: {name} must be a backend name (str), got {value!r}."
                )
        if self.baseline is not None and self.wants_rows:
            raise BenchmarkTypeError(
                f"{self.where}: baseline= belongs to the default comparison table; "
                "with sort_by/group_by/compare_by/order_by/vary_by use "
                "speedup_vs='<backend>' or compare_by= for the speed-up column."
            )

    @property
    def wants_rows(self) -> bool:
        """Whether a reference row-table keyword was given."""
        given = (self.sort_by, self.group_by, self.compare_by, self.order_by)
        return any(v is not None for v in (*given, self.speedup_vs, self.vary_by))

    def check_columns(self, columns: Collection[str]) -> None:
        """Raise ``ValueError`` for a column name the table does not have."""
        extra = {"speedup"} if self.compare_by is not None else set()
        for name in _COLUMN_LISTS:
            for col in getattr(self, name) or ():
                if col not in columns and col not in extra:
                    raise BenchmarkValueError(
                        f"{self.where}: {name} names {col!r}, which is not a column "
                        f"of this result; columns: {list(columns)}."
                    )
