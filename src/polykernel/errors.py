"""Exception classes raised by polykernel.

Every class derives from :class:`PolykernelError` *and* from the builtin that best
describes the failure, so ``except ValueError`` (or ``ImportError``, ...) keeps working
for callers that do not know about polykernel.

Messages follow one template: *where* (primitive, backend, platform or file), *what*
(expected vs got) and *how to fix* (the exact API, argument, extra or environment
variable). Every message is pinned by a test.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailableError",
    "BenchmarkDataFnNotProvidedError",
    "BenchmarkMismatchWarning",
    "CacheError",
    "CompilationError",
    "DuplicatePrimitiveWarning",
    "KernelCallError",
    "KernelCompilationError",
    "KernelExecutionError",
    "KernelNotAvailableError",
    "KernelRegistrationError",
    "PolykernelError",
    "PolykernelWarning",
    "ToolchainError",
    "UnsupportedTransformError",
]


class PolykernelError(Exception):
    """Base class of every exception polykernel raises on purpose."""


class KernelRegistrationError(PolykernelError, ValueError):
    """A primitive, kernel, default or rule was defined with invalid arguments."""


class KernelCallError(PolykernelError, TypeError):
    """A kernel was called with inputs, outputs or attributes its spec does not take."""


class KernelNotAvailableError(PolykernelError, NotImplementedError):
    """No kernel is registered for the platform (or backend) a call needs."""


class KernelCompilationError(PolykernelError, RuntimeError):
    """A kernel generator raised, or its kernel failed to lower for a platform."""


class KernelExecutionError(PolykernelError, RuntimeError):
    """A kernel failed while running (for example it raised inside Numba)."""


class BackendUnavailableError(PolykernelError, ImportError):
    """An optional package a backend needs is not installed."""


class ToolchainError(PolykernelError, RuntimeError):
    """A compiler, CUDA toolkit or target architecture could not be found."""


class CompilationError(PolykernelError, RuntimeError):
    """A native compiler failed; carries its output and the kept source file.

    Attributes:
        output: Everything the compiler printed (stdout and stderr).
        source_path: Path of the source file kept for inspection, if any.
        command: The command line that was run.
    """

    def __init__(
        self,
        message: str,
        *,
        output: str = "",
        source_path: str | None = None,
        command: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.output = output
        self.source_path = source_path
        self.command = list(command or [])


class CacheError(PolykernelError, OSError):
    """The on-disk cache cannot be created, read or trusted."""


class BenchmarkDataFnNotProvidedError(PolykernelError, ValueError):
    """``benchmark()`` was called before ``def_benchmark_data()``."""


class UnsupportedTransformError(PolykernelError, NotImplementedError):
    """A JAX transformation has no rule for this primitive."""


class PolykernelWarning(UserWarning):
    """Base class of every warning polykernel emits."""


class DuplicatePrimitiveWarning(PolykernelWarning):
    """A second primitive was created under a name already in the registry."""


class BenchmarkMismatchWarning(PolykernelWarning):
    """Two backends of one primitive disagreed on the same benchmark inputs."""
