"""What one primitive's benchmark will run: its configs on its backends, checked.

:func:`plan_benchmark` is made before any timing, so a caller benchmarking several
primitives knows the number of steps of the whole run up front (one progress
total); :func:`~.runner.run_benchmark` runs a plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import (
    BenchmarkDataFnNotProvidedError,
    BenchmarkTypeError,
    BenchmarkValueError,
)
from ..platforms import PLATFORMS
from .config import BenchmarkConfig

__all__ = ["BenchmarkPlan", "check_plan", "plan_benchmark"]


def _select_backends(kernel: Any, platform: str, backends: Any) -> list[str]:
    name = kernel.name
    available = list(kernel.available_backends(platform))
    if not available:
        registered = {p: list(kernel.available_backends(p)) for p in PLATFORMS}
        registered = {p: b for p, b in registered.items() if b}
        raise BenchmarkValueError(
            f"XLACustomKernel '{name}'.benchmark: no backend is registered for "
            f"platform '{platform}' (registered: {registered or 'none'}). Register "
            f"a kernel for '{platform}' or benchmark another platform."
        )
    if backends is None:
        return available
    wanted = [backends] if isinstance(backends, str) else list(backends)
    unknown = [b for b in wanted if b not in available]
    if unknown or not wanted:
        raise BenchmarkValueError(
            f"XLACustomKernel '{name}'.benchmark: backends={wanted!r} not all "
            f"registered for platform '{platform}' (registered: {available})."
        )
    return wanted


def _configs(kernel: Any, platform: str) -> list[BenchmarkConfig]:
    name = kernel.name
    returned = kernel.benchmark_data_function(platform=platform)
    try:
        configs = list(returned)
    except TypeError:
        raise BenchmarkTypeError(
            f"XLACustomKernel '{name}'.benchmark: the benchmark data function must "
            f"return a non-empty list of BenchmarkConfig, got "
            f"{type(returned).__name__}: {returned!r}."
        ) from None
    bad = [type(c).__name__ for c in configs if not isinstance(c, BenchmarkConfig)]
    if bad or not configs:
        got = f"items of type {sorted(set(bad))}" if bad else "an empty list"
        raise BenchmarkTypeError(
            f"XLACustomKernel '{name}'.benchmark: the benchmark data function must "
            f"return a non-empty list of BenchmarkConfig, got {got}."
        )
    return configs


def _check_ready(kernel: Any) -> None:
    # The data function is checked first: when both are missing the reference
    # raises ValueError, and BenchmarkDataFnNotProvidedError is a ValueError too.
    name = kernel.name
    if kernel.benchmark_data_function is None:
        raise BenchmarkDataFnNotProvidedError(
            f"XLACustomKernel '{name}'.benchmark: no benchmark data function. "
            "Register one with def_benchmark_data(fn), where fn(*, platform) returns "
            "a list of BenchmarkConfig."
        )
    if kernel.call_function is None:
        raise BenchmarkValueError(
            f"XLACustomKernel '{name}'.benchmark: no call function. Register the "
            "user-facing wrapper with def_call(fn); it must accept backend=."
        )


@dataclass(frozen=True)
class BenchmarkPlan:
    """What one primitive's benchmark will run: its configs on its backends.

    Made before any timing so a caller benchmarking several primitives knows the
    number of steps of the whole run up front (for one progress total).
    """

    kernel: Any
    platform: str
    backends: tuple[str, ...]
    configs: tuple[BenchmarkConfig, ...]

    @property
    def steps(self) -> int:
        """Number of (config, backend) runs."""
        return len(self.configs) * len(self.backends)


def plan_benchmark(
    kernel: Any, *, platform: str, backends: Sequence[str] | str | None = None
) -> BenchmarkPlan:
    """Check ``kernel`` can be benchmarked and collect its configs and backends.

    Raises:
        ValueError: no ``def_call`` function, or no (or an unknown) backend.
        BenchmarkDataFnNotProvidedError: no ``def_benchmark_data`` function.
        TypeError: the data function returned something else than configs.
    """
    _check_ready(kernel)
    chosen = _select_backends(kernel, platform, backends)
    configs = _configs(kernel, platform)
    return BenchmarkPlan(kernel, platform, tuple(chosen), tuple(configs))


def check_plan(plan: BenchmarkPlan, kernel: Any, platform: str, backends) -> None:
    wanted = [backends] if isinstance(backends, str) else backends
    same_backends = wanted is None or tuple(wanted) == plan.backends
    if plan.kernel is not kernel or plan.platform != platform or not same_backends:
        raise BenchmarkValueError(
            f"run_benchmark of '{kernel.name}' on '{platform}': the plan was made "
            f"for '{plan.kernel.name}' on '{plan.platform}' with backends "
            f"{list(plan.backends)}; pass plan_benchmark(kernel, platform=...) of "
            "the same kernel, platform and backends."
        )
