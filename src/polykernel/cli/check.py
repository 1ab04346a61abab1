"""``polykernel check``: run ``check_kernel`` on registered primitives.

Each primitive is checked on the smallest case of its benchmark data (``--all-cases``
for every case), through its call function. Exit code 1 when any check fails or a
primitive cannot be checked, 2 for usage errors.
"""

from __future__ import annotations

import sys
from typing import Any

from ._common import CliError, csv_list, failure, plural
from .selection import add_selection_args, select

__all__ = ["cmd_check", "register"]


def _check_names(text: str) -> list[str]:
    import argparse

    from ..testing import CHECKS

    names = csv_list(text)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown check(s) {', '.join(unknown)}; choose from {', '.join(CHECKS)}"
        )
    return names


def register(sub: Any, common: Any) -> None:
    """Add the ``check`` sub-command to ``sub``."""
    p = sub.add_parser(
        "check", parents=[common], help="check primitives (backends, vmap, AD, ...)"
    )
    add_selection_args(p)
    p.add_argument(
        "--backends", type=csv_list, default=None, metavar="A,B", help="only these"
    )
    p.add_argument(
        "--checks", type=_check_names, default=None, metavar="A,B", help="only these"
    )
    p.add_argument("--rtol", type=float, default=None, help="float rtol override")
    p.add_argument("--atol", type=float, default=None, help="float atol override")
    p.add_argument(
        "--all-cases",
        action="store_true",
        help="every benchmark case, not the smallest",
    )
    p.add_argument(
        "--failures-only", action="store_true", help="print only failed checks"
    )
    p.set_defaults(handler=cmd_check)


def _checkable(chosen: dict[str, Any]) -> list[Any]:
    kernels = []
    for name, kernel in chosen.items():
        if kernel.call_function is None or kernel.benchmark_data_function is None:
            print(
                f"polykernel check: skipping {name} (needs def_call and "
                "def_benchmark_data)",
                file=sys.stderr,
            )
        else:
            kernels.append(kernel)
    if not kernels:
        raise CliError(
            f"no registered primitive can be checked (matched {len(chosen)}). Import "
            "primitives with --module MOD; each needs def_call and def_benchmark_data."
        )
    return kernels


def _unknown_backends(kernels: list[Any], wanted: list[str] | None) -> list[str]:
    registered = {
        b
        for k in kernels
        for p in ("cpu", "gpu", "tpu")
        for b in k.available_backends(p)
    }
    return sorted(set(wanted or ()) - registered)


def _platform_of(kernel: Any) -> str:
    from ..testing.runner import present_platforms

    for platform in present_platforms():
        if kernel.available_backends(platform):
            return platform
    return "cpu"


def cmd_check(args: Any) -> int:
    """Handler of ``polykernel check``."""
    from ..testing.from_benchmarks import check_benchmark_cases

    kernels = _checkable(select(args))
    unknown = _unknown_backends(kernels, args.backends)
    if unknown:
        print(
            f"polykernel check: error: --backends {', '.join(unknown)}: not registered "
            f"by any selected primitive",
            file=sys.stderr,
        )
        return 2
    options = {"backends": args.backends, "checks": args.checks}
    options.update(rtol=args.rtol, atol=args.atol)
    totals, errors = [0, 0, 0], []
    for kernel in kernels:
        chosen = [b for b in (args.backends or []) if b in _all_backends(kernel)]
        if args.backends and not chosen:
            continue
        opts = dict(options, backends=chosen or None)
        try:
            reports = check_benchmark_cases(
                kernel, _platform_of(kernel), args.all_cases, **opts
            )
        except (Exception, SystemExit) as err:  # sys.exit in its data: reported
            errors.append(f"{kernel.name}: {failure(err)}")
            continue
        for case, report in reports:
            _print_report(report, case, args.failures_only)
            totals[0] += len(report.passed)
            totals[1] += len(report.failures)
            totals[2] += len(report.skipped)
    print(
        f"{plural(len(kernels), 'primitive')}: {totals[0]} passed, {totals[1]} failed, "
        f"{totals[2]} skipped"
    )
    for line in errors:
        print(f"polykernel check: error: {' '.join(line.split())}", file=sys.stderr)
    return 1 if errors or totals[1] else 0


def _all_backends(kernel: Any) -> set[str]:
    return {b for p in ("cpu", "gpu", "tpu") for b in kernel.available_backends(p)}


def _print_report(report: Any, case: str, failures_only: bool) -> None:
    print(f"== {report.name} [{case}]: {report.summary().split(': ', 1)[1]}")
    if not failures_only:
        print(report.table())
    elif report.failures:
        print(report.table(report.failures))
    print()
