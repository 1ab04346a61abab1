"""What ``check_kernel`` returns: one row per check, printable as a table."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

from ..errors import PolykernelError

__all__ = ["CheckReport", "CheckResult", "KernelCheckError"]

PASS, FAIL, SKIP = "pass", "fail", "skip"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """The outcome of one check on one backend.

    Attributes:
        check: Which check, e.g. ``"vmap_vs_loop"`` (see ``check_kernel``).
        backend: The backend under test.
        platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
        status: ``"pass"``, ``"fail"`` or ``"skip"``.
        case: Which variant, e.g. ``"in_axes=(0, None)"`` or ``"input 1"``.
        max_abs: Largest absolute error seen (``None`` when nothing was compared).
        max_rel: Largest relative error seen.
        detail: The tolerance used, what differed, an error, or why it was skipped.
    """

    check: str
    backend: str
    platform: str
    status: str
    case: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    detail: str = ""


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return "inf" if math.isinf(x) else f"{x:.2e}"


class CheckReport:
    """Every :class:`CheckResult` of one ``check_kernel`` call.

    ``str(report)`` is a table; ``report.ok`` is true when nothing failed.
    """

    COLUMNS = ("check", "backend", "platform", "case", "status", "max abs", "max rel")

    def __init__(self, name: str, results: list[CheckResult]) -> None:
        self.name = name
        self.results = list(results)

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def ok(self) -> bool:
        """True when no check failed (skipped checks do not count as failures)."""
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == FAIL]

    @property
    def skipped(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == SKIP]

    @property
    def passed(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == PASS]

    def table(self, results: list[CheckResult] | None = None) -> str:
        """The results (default: all) as an aligned text table."""
        chosen = self.results if results is None else results
        rows = [self.COLUMNS] + [
            (
                r.check,
                r.backend,
                r.platform,
                r.case,
                r.status.upper() if r.status == FAIL else r.status,
                _num(r.max_abs),
                _num(r.max_rel),
            )
            for r in chosen
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(self.COLUMNS))]
        lines = []
        for row, result in zip(rows, [None, *chosen], strict=True):
            text = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
            detail = "" if result is None or not result.detail else result.detail
            lines.append(f"{text}  {detail}".rstrip())
        return "\n".join(lines)

    def summary(self) -> str:
        return (
            f"check_kernel '{self.name}': {len(self.passed)} passed, "
            f"{len(self.failures)} failed, {len(self.skipped)} skipped"
        )

    def __str__(self) -> str:
        return f"{self.summary()}\n{self.table()}"

    def __repr__(self) -> str:
        return f"<CheckReport {self.summary()}>"


class KernelCheckError(PolykernelError, AssertionError):
    """``check_kernel`` found failures; ``.report`` holds every result."""

    def __init__(self, report: CheckReport) -> None:
        self.report = report
        super().__init__(
            f"{report.summary()}. Failed checks:\n{report.table(report.failures)}\n"
            "Each row names the check, backend and case; run check_kernel(..., "
            "raise_on_failure=False) and print the report for every result."
        )
