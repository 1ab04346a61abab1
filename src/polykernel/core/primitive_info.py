"""What the registry, the CLI and benchmarks know about a primitive.

:class:`CatalogMixin` holds the user-facing call function (``def_call``/``call``),
the tags and the benchmark data function of an ``XLACustomKernel``, and runs its
benchmark. None of it touches JAX's rule tables, so it lives apart from the wiring
in :mod:`polykernel.core.primitive`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..errors import KernelRegistrationError, KernelTypeError
from ..types import PlatformName

__all__ = ["CatalogMixin"]


class CatalogMixin:
    """Call function, tags and benchmarking of a primitive named ``self.name``."""

    name: str
    _tags: tuple[str, ...] = ()
    _call_fn: Callable[..., Any] | None = None
    _benchmark_data_fn: Callable[..., Any] | None = None

    def def_call(self, fn: Callable[..., Any]) -> None:
        """Store the user-facing call function used by :meth:`call` and benchmarks."""
        self._require_callable("def_call", fn)
        self._call_fn = fn

    def _require_callable(self, method: str, fn: Any) -> None:
        if not callable(fn):
            raise KernelTypeError(
                f"XLACustomKernel '{self.name}'.{method}(): expected a function (got "
                f"{type(fn).__name__}: {fn!r})."
            )

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Invoke the function registered with :meth:`def_call`."""
        if self._call_fn is None:
            raise KernelRegistrationError(
                f"XLACustomKernel '{self.name}'.call(): no call function is "
                f"registered. Register one with def_call(fn)."
            )
        return self._call_fn(*args, **kwargs)

    @property
    def call_function(self) -> Callable[..., Any] | None:
        """The function given to :meth:`def_call`, or ``None``."""
        return self._call_fn

    def def_tags(self, *tags: str) -> None:
        """Replace this primitive's tags (used by the registry and the CLI)."""
        for tag in tags:
            if not isinstance(tag, str):
                raise KernelTypeError(
                    f"XLACustomKernel '{self.name}'.def_tags(): tags must be strings "
                    f"(got {type(tag).__name__}: {tag!r})."
                )
            if not tag:
                raise KernelRegistrationError(
                    f"XLACustomKernel '{self.name}'.def_tags(): tags must be non-empty "
                    f"strings (got '')."
                )
        self._tags = tuple(tags)

    @property
    def tags(self) -> tuple[str, ...]:
        """Tags set by :meth:`def_tags`."""
        return self._tags

    def def_benchmark_data(self, fn: Callable[..., Any]) -> None:
        """Register ``fn(*, platform) -> list[BenchmarkConfig]`` for benchmarks."""
        self._require_callable("def_benchmark_data", fn)
        self._benchmark_data_fn = fn

    @property
    def benchmark_data_function(self) -> Callable[..., Any] | None:
        """The function given to :meth:`def_benchmark_data`, or ``None``."""
        return self._benchmark_data_fn

    def benchmark(
        self,
        *,
        platform: PlatformName,
        n_warmup: int = 5,
        n_runs: int = 20,
        n_batch_per_run: int = 1,
        compare_results: bool = True,
        rtol: float = 1e-3,
        atol: float = 1e-3,
        verbose: bool = False,
        catch_errors: bool = True,
        backends: Sequence[str] | None = None,
    ) -> Any:
        """Time every backend on every benchmark config; return a BenchmarkResult.

        See ``polykernel.benchmark`` for the statistics recorded.
        """
        from ..benchmark.runner import run_benchmark

        return run_benchmark(
            self,
            platform=platform,
            n_warmup=n_warmup,
            n_runs=n_runs,
            n_batch_per_run=n_batch_per_run,
            compare_results=compare_results,
            rtol=rtol,
            atol=atol,
            verbose=verbose,
            catch_errors=catch_errors,
            backends=backends,
        )
