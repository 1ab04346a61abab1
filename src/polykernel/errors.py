"""Exception classes raised by polykernel.

The reference API's names exist here with the reference's hierarchy, so code that
catches ``KernelError``, ``KernelFallbackExhaustedError``, ``CompilationError`` ...
catches what it caught before. Every class also derives from the builtin that best
describes the failure, so ``except ValueError`` (or ``TypeError``, ``ImportError``,
...) keeps working for callers that know nothing about polykernel::

    PolykernelError (alias BrainEventError)
    ├── KernelError
    │   ├── KernelNotAvailableError .............. ImportError
    │   │   └── BackendUnavailableError
    │   ├── KernelFallbackExhaustedError ......... NotImplementedError
    │   │   └── UnknownBackendError .............. + KernelRegistrationError
    │   ├── KernelCompilationError ............... RuntimeError
    │   │   └── CompilationError
    │   │       └── HostCompilerIncompatibleError
    │   ├── KernelExecutionError ................. RuntimeError
    │   ├── KernelToolchainError (ToolchainError)  RuntimeError
    │   │   ├── NvccNotFoundError, HostCompilerNotFoundError,
    │   │   │   HeaderNotFoundError, GpuArchDetectionError
    │   │   └── UnsupportedArchError ............. + ValueError
    │   ├── CUDANotInstalledError ................ ImportError
    │   ├── KernelLoadError ...................... OSError
    │   │   └── BundleError (pk.load_bundle)
    │   │       ├── BundleFormatError ............ + ValueError
    │   │       ├── BundleChecksumError .......... + ValueError
    │   │       └── BundleMismatchError .......... + RuntimeError
    │   │           ├── BundleMachineError (architecture, CPU instruction set)
    │   │           ├── BundleFfiVersionError (XLA FFI API or layout)
    │   │           └── BundleGpuArchError (no image for this GPU)
    │   ├── KernelRegistrationError .............. ValueError
    │   │   └── UnsupportedPlatformError ......... + AssertionError
    │   ├── KernelTypeError ...................... TypeError, AssertionError
    │   │   ├── UnsupportedDtypeError ............ + ValueError
    │   │   └── UnsupportedShapeError ............ + ValueError
    │   ├── KernelCallError ...................... TypeError
    │   │   └── AttributeValueError .............. + ValueError
    │   ├── BackendHookError ..................... TypeError
    │   ├── KernelLookupError .................... KeyError
    │   ├── KernelSourceNotFoundError ............ FileNotFoundError
    │   ├── UnsupportedFeatureError .............. NotImplementedError
    │   │   └── UnsupportedTransformError
    │   └── CacheError ........................... OSError
    ├── BenchmarkDataFnNotProvidedError .......... ValueError
    ├── MathError ................................ ValueError
    ├── UnsupportedOperationError ................ TypeError
    ├── TuningError .............................. RuntimeError
    │   ├── TuningTypeError ...................... + TypeError
    │   └── TuningValueError ..................... + ValueError
    ├── BenchmarkError (polykernel.benchmark)
    │   ├── BenchmarkValueError .................. ValueError
    │   ├── BenchmarkTypeError ................... TypeError
    │   ├── BenchmarkFileNotFoundError ........... FileNotFoundError
    │   └── BenchmarkWriteError .................. OSError
    └── CheckError (polykernel.testing)
        ├── CheckValueError ...................... ValueError
        └── CheckTypeError ....................... TypeError

The warning classes live in :mod:`polykernel.warning_types` and are listed here
too. Messages follow one template: *where* (primitive, backend, platform or file),
*what* (expected vs got) and *how to fix* (the exact API, argument, extra or environment
variable). Every message is pinned by a test.
"""

from __future__ import annotations

from .warning_types import (
    BackendPreferenceWarning,
    BenchmarkMismatchWarning,
    CacheWarning,
    DuplicatePrimitiveWarning,
    JobFallbackWarning,
    PolykernelDeprecationWarning,
    PolykernelWarning,
    TuningWarning,
)

__all__ = [
    "AttributeValueError", "BackendHookError", "BackendPreferenceWarning",
    "BackendUnavailableError", "BenchmarkDataFnNotProvidedError", "BenchmarkError",
    "BenchmarkFileNotFoundError", "BenchmarkMismatchWarning", "BenchmarkTypeError",
    "BenchmarkValueError", "BenchmarkWriteError", "BrainEventError",
    "BundleChecksumError", "BundleError", "BundleFfiVersionError", "BundleFormatError",
    "BundleGpuArchError", "BundleMachineError", "BundleMismatchError",
    "CUDANotInstalledError", "CacheError", "CacheWarning", "CheckError",
    "CheckTypeError", "CheckValueError", "CompilationError",
    "DuplicatePrimitiveWarning", "GpuArchDetectionError", "HeaderNotFoundError",
    "HostCompilerIncompatibleError", "HostCompilerNotFoundError", "JobFallbackWarning",
    "KernelCallError", "KernelCompilationError", "KernelError", "KernelExecutionError",
    "KernelFallbackExhaustedError", "KernelLoadError", "KernelLookupError",
    "KernelNotAvailableError", "KernelRegistrationError", "KernelSourceNotFoundError",
    "KernelToolchainError", "KernelTypeError", "MathError", "NvccNotFoundError",
    "PolykernelDeprecationWarning", "PolykernelError", "PolykernelWarning",
    "ToolchainError", "TuningError", "TuningTypeError", "TuningValueError",
    "TuningWarning", "UnknownBackendError", "UnsupportedArchError",
    "UnsupportedDtypeError", "UnsupportedFeatureError", "UnsupportedOperationError",
    "UnsupportedPlatformError", "UnsupportedShapeError", "UnsupportedTransformError"
]  # fmt: skip


class PolykernelError(Exception):
    """Base class of every exception polykernel raises on purpose."""


#: The reference API's root exception name.
BrainEventError = PolykernelError


class KernelError(PolykernelError):
    """Base class of every error of the kernel layer (everything but benchmarks)."""


# -- which kernel runs ---------------------------------------------------------------
class KernelNotAvailableError(KernelError, ImportError):
    """A backend cannot be used: its package is missing or has the wrong version."""


class BackendUnavailableError(KernelNotAvailableError):
    """An optional package a backend needs is not installed (names the pip extra)."""


class KernelFallbackExhaustedError(KernelError, NotImplementedError):
    """No registered kernel can run the call on its platform."""


class KernelRegistrationError(KernelError, ValueError):
    """A primitive, kernel, default, rule, setting or FFI target got a bad value."""


class UnknownBackendError(KernelFallbackExhaustedError, KernelRegistrationError):
    """A call asked for a backend that is not registered for its platform."""


class UnsupportedPlatformError(KernelRegistrationError, AssertionError):
    """A backend shorthand was given a platform it cannot target.

    Also an ``AssertionError``: the reference documents ``AssertionError`` for the
    platform check of ``def_pallas_kernel``; this class satisfies both ``except``
    clauses (and ``ValueError``, as every bad value does here).
    """


# -- building and running ------------------------------------------------------------
class KernelCompilationError(KernelError, RuntimeError):
    """A kernel generator raised, or its kernel failed to lower for a platform."""


class CompilationError(KernelCompilationError):
    """A native compiler failed; carries its output and the kept source file.

    Accepts the reference's keywords (``compiler_output``, ``command`` as a string,
    ``stage``) as well as ours (``output``, ``source_path``, ``command`` as a list).
    The message is kept as given: polykernel's own raise sites already include the
    relevant compiler output in it.

    Attributes:
        output: Everything the compiler printed (stdout and stderr); also available
            as ``compiler_output``.
        source_path: Path of the source file kept for inspection, if any.
        command: The command line that was run (a list, or the string given).
        stage: ``"compile"`` or ``"link"``.
    """

    def __init__(
        self,
        message: str,
        compiler_output: str = "",
        command: list[str] | str | None = None,
        stage: str = "compile",
        *,
        output: str | None = None,
        source_path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.output = output if output is not None else compiler_output
        self.source_path = source_path
        self.command = command if isinstance(command, str) else list(command or [])
        self.stage = stage

    @property
    def compiler_output(self) -> str:
        """The reference's name for :attr:`output`."""
        return self.output


class HostCompilerIncompatibleError(CompilationError):
    """nvcc refused the host C++ compiler's version."""


class KernelExecutionError(KernelError, RuntimeError):
    """A kernel failed while running (for example it raised inside Numba)."""


class KernelLoadError(KernelError, OSError):
    """A compiled shared library could not be loaded, or lacks a handler symbol."""


class BundleError(KernelLoadError):
    """A kernel bundle (``pk.export_bundle``) cannot be written or loaded here."""


class BundleFormatError(BundleError, ValueError):
    """The file is not a bundle, is damaged, or was written by a newer polykernel."""


class BundleChecksumError(BundleError, ValueError):
    """A file inside a bundle does not have the SHA-256 its manifest records."""


class BundleMismatchError(BundleError, RuntimeError):
    """A bundle's kernel needs something this machine or process lacks."""


class BundleMachineError(BundleMismatchError):
    """A kernel was built for another architecture or a CPU with instructions
    this CPU lacks."""


class BundleFfiVersionError(BundleMismatchError):
    """A kernel's handler speaks an XLA FFI API version or layout the installed
    jaxlib does not."""


class BundleGpuArchError(BundleMismatchError):
    """A GPU kernel has no image (cubin or PTX) this GPU can run."""


class KernelSourceNotFoundError(KernelError, FileNotFoundError):
    """A kernel source file or directory does not exist or holds no sources."""


# -- toolchain -----------------------------------------------------------------------
class KernelToolchainError(KernelError, RuntimeError):
    """A compiler, CUDA toolkit, header or target architecture could not be found."""


#: polykernel's earlier name for :class:`KernelToolchainError`.
ToolchainError = KernelToolchainError


class NvccNotFoundError(KernelToolchainError):
    """nvcc could not be found."""


class HostCompilerNotFoundError(KernelToolchainError):
    """No host C++ compiler (g++ / clang++) could be found."""


class HeaderNotFoundError(KernelToolchainError):
    """A header the build needs (CUDA runtime, XLA FFI, polykernel) is missing."""


class GpuArchDetectionError(KernelToolchainError):
    """No CUDA architecture was given and none could be detected."""


class UnsupportedArchError(KernelToolchainError, ValueError):
    """A CUDA architecture is malformed or not supported by the installed nvcc.

    Attributes:
        compiler_output: nvcc's output, when nvcc reported it.
        command: The nvcc command line, when there was one.
        stage: The compilation stage, when there was one.
    """

    def __init__(
        self,
        message: str,
        *,
        compiler_output: str = "",
        command: str = "",
        stage: str = "",
    ) -> None:
        super().__init__(message)
        self.compiler_output = compiler_output
        self.command = command
        self.stage = stage


class CUDANotInstalledError(KernelError, ImportError):
    """A CUDA operation was requested but the CUDA package is not installed."""


# -- arguments -----------------------------------------------------------------------
class KernelTypeError(KernelError, TypeError, AssertionError):
    """An argument of a polykernel API has the wrong type.

    Also an ``AssertionError``: the reference documents ``AssertionError`` for the
    type checks of ``def_kernel`` (and raises ``TypeError``); this class satisfies
    both ``except`` clauses.
    """


class UnsupportedDtypeError(KernelTypeError, ValueError):
    """A backend has no such dtype (Warp and bfloat16 or complex, Numba-CUDA and
    bfloat16). A ``ValueError``, as the reference raises, and still a ``TypeError``."""


class UnsupportedShapeError(KernelTypeError, ValueError):
    """A backend cannot represent an array of this rank (a 0-d Warp array, a rank
    above 4). A ``ValueError``, as the reference raises, and still a ``TypeError``."""


class KernelCallError(KernelError, TypeError):
    """A kernel was called with inputs, outputs or attributes its spec does not take."""


class AttributeValueError(KernelCallError, ValueError):
    """An attribute value does not fit its declared dtype (None, out of range...)."""


class BackendHookError(KernelError, TypeError):
    """A backend's hook (``emit``, ``translate_error``, ``usable``, ``info_rows``)
    returned what the backend protocol does not allow, or raised where it must not.

    The message names the backend, the hook, what was expected and what came back;
    the hook's own exception, when it raised, is chained (``__cause__``).
    """


class KernelLookupError(KernelError, KeyError):
    """A name (function, primitive) is not known; the message lists what is."""

    def __str__(self) -> str:
        # KeyError would print the repr of the message, quotes and escapes included.
        return str(self.args[0]) if self.args else ""


class UnsupportedFeatureError(KernelError, NotImplementedError):
    """polykernel does not implement what was asked for (e.g. HIP compilation)."""


class UnsupportedTransformError(UnsupportedFeatureError):
    """A JAX transformation has no rule for this primitive."""


class CacheError(KernelError, OSError):
    """The on-disk cache cannot be created, read or trusted."""


# -- outside the kernel layer ----------------------------------------------------------
class BenchmarkDataFnNotProvidedError(PolykernelError, ValueError):
    """``benchmark()`` was called before ``def_benchmark_data()``."""


class MathError(PolykernelError, ValueError):
    """A mathematical operation got inputs it cannot handle (reference name)."""


class UnsupportedOperationError(PolykernelError, TypeError):
    """An operation has no meaning for this kind of object (reference name)."""


class TuningError(PolykernelError, RuntimeError):
    """Tuning cannot run as asked (inside a traced program, no candidate, no data),
    or a tuned table cannot be written."""


class TuningTypeError(TuningError, TypeError):
    """An argument of ``tune()`` (or ``polykernel tune``) has the wrong type."""


class TuningValueError(TuningError, ValueError):
    """An argument of ``tune()`` (or ``polykernel tune``) has a bad value."""


# -- the benchmark harness and check_kernel: each also the builtin raised before ------
class BenchmarkError(PolykernelError):
    """Base class of the errors of :mod:`polykernel.benchmark`."""


class BenchmarkValueError(BenchmarkError, ValueError):
    """A benchmark argument, option, filter expression, results file or record has a
    bad value; the message names where (function, file, record, field) and the fix."""


class BenchmarkTypeError(BenchmarkError, TypeError):
    """A benchmark argument has the wrong type (a config, record, path or option)."""


class BenchmarkFileNotFoundError(BenchmarkError, FileNotFoundError):
    """A results file to load does not exist or is not a file."""


class BenchmarkWriteError(BenchmarkError, OSError):
    """A results file cannot be written (the message names the path)."""


class CheckError(PolykernelError):
    """Base class of ``check_kernel``'s argument errors (a failed check itself is a
    ``KernelCheckError``, an ``AssertionError``)."""


class CheckValueError(CheckError, ValueError):
    """A ``check_kernel`` argument has a bad value (checks, tolerances, backends)."""


class CheckTypeError(CheckError, TypeError):
    """A ``check_kernel`` argument has the wrong type."""
