"""``check_kernel`` on a primitive's own benchmark data (``polykernel check``).

A benchmark case holds arguments of the primitive's *call function* (``def_call``),
which may convert them and add ``outs`` before it binds the primitive. To check the
primitive itself, the call function runs once on the case while the primitive's
``bind`` is observed: the first binding gives the inputs, ``outs`` and parameters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import jax.core
import numpy as np

from ..errors import CheckValueError
from .report import CheckReport
from .runner import check_kernel

__all__ = ["check_benchmark_cases", "recorded_binding", "smallest_case"]


@contextlib.contextmanager
def _observing(kernel: Any) -> Iterator[list[tuple[tuple, dict]]]:
    prim = kernel.primitive
    seen: list[tuple[tuple, dict]] = []
    original = prim.bind

    def bind(*args: Any, **params: Any) -> Any:
        seen.append((args, params))
        return original(*args, **params)

    # An instance attribute shadows Primitive.bind for this primitive only, for the
    # duration of one eager call (the CLI is single-threaded; nothing else binds it).
    prim.bind = bind
    try:
        yield seen
    finally:
        del prim.bind


def recorded_binding(kernel: Any, case: Any) -> tuple[tuple, Any, dict[str, Any]]:
    """``(inputs, outs, parameters)`` the call function binds for ``case``.

    Raises:
        ValueError: the call function did not bind the primitive eagerly.
    """
    with _observing(kernel) as seen:
        kernel.call(*case.args, **case.kernel_kwargs)
    where = f"primitive '{kernel.name}', benchmark case '{case.name}'"
    if not seen:
        raise CheckValueError(
            f"{where}: the call function (def_call) did not bind the primitive; "
            "polykernel check needs a call function that calls it."
        )
    args, params = seen[0]
    if any(isinstance(a, jax.core.Tracer) for a in args):
        raise CheckValueError(
            f"{where}: the call function binds the primitive under a transformation "
            "(e.g. jax.jit), so its inputs cannot be recorded; call the primitive "
            "directly in the call function."
        )
    params = dict(params)
    outs = params.pop("outs")
    params.pop("backend", None)
    return tuple(np.asarray(a) for a in args), list(outs), params


def smallest_case(cases: list[Any]) -> Any:
    """The case with the fewest input bytes (a fast, representative check)."""
    return min(cases, key=lambda c: sum(np.asarray(a).nbytes for a in c.args))


def check_benchmark_cases(
    kernel: Any, platform: str, all_cases: bool = False, **options: Any
) -> list[tuple[str, CheckReport]]:
    """Run ``check_kernel`` on the smallest (or every) benchmark case of ``kernel``.

    ``options`` go to ``check_kernel`` (``backends``, ``checks``, ``rtol``, ...).
    """
    cases = list(kernel.benchmark_data_function(platform=platform))
    if not cases:
        raise CheckValueError(
            f"primitive '{kernel.name}': def_benchmark_data returned no cases for "
            f"platform '{platform}'."
        )
    chosen = cases if all_cases else [smallest_case(cases)]
    reports = []
    for case in chosen:
        args, outs, params = recorded_binding(kernel, case)
        report = check_kernel(
            kernel, *args, outs=outs, raise_on_failure=False, **options, **params
        )
        reports.append((case.name, report))
    return reports
