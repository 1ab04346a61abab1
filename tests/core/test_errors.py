"""The exception hierarchy: the reference's names and relations, plus builtin bases."""

from __future__ import annotations

import itertools

import pytest

import polykernel as pk
from polykernel import errors

# The reference's exception classes (brainevent 0.3.0) and each one's direct parent
# in its hierarchy, read from the installed wheel.
REFERENCE_PARENT = {
    "BrainEventError": None,
    "MathError": "BrainEventError",
    "UnsupportedOperationError": "BrainEventError",
    "KernelError": "BrainEventError",
    "BenchmarkDataFnNotProvidedError": "BrainEventError",
    "KernelNotAvailableError": "KernelError",
    "KernelCompilationError": "KernelError",
    "KernelFallbackExhaustedError": "KernelError",
    "KernelExecutionError": "KernelError",
    "KernelToolchainError": "KernelError",
    "KernelRegistrationError": "KernelError",
    "CUDANotInstalledError": "KernelError",
    "KernelLoadError": "KernelError",
    "CompilationError": "KernelCompilationError",
    "HostCompilerIncompatibleError": "CompilationError",
    "NvccNotFoundError": "KernelToolchainError",
    "HostCompilerNotFoundError": "KernelToolchainError",
    "HeaderNotFoundError": "KernelToolchainError",
    "GpuArchDetectionError": "KernelToolchainError",
    "UnsupportedArchError": "KernelToolchainError",
}


def reference_issubclass(child: str, parent: str) -> bool:
    name: str | None = child
    while name is not None:
        if name == parent:
            return True
        name = REFERENCE_PARENT[name]
    return False


# Every exception class we export, grouped by the builtin(s) it must also be.
_BY_BUILTINS = {
    (ImportError,): [
        pk.KernelNotAvailableError,
        pk.BackendUnavailableError,
        pk.CUDANotInstalledError,
    ],
    (NotImplementedError,): [
        pk.KernelFallbackExhaustedError,
        pk.UnsupportedFeatureError,
        pk.UnsupportedTransformError,
    ],
    (NotImplementedError, ValueError): [pk.UnknownBackendError],
    (ValueError,): [
        pk.KernelRegistrationError,
        pk.BenchmarkDataFnNotProvidedError,
        pk.MathError,
        pk.BenchmarkValueError,
        pk.CheckValueError,
    ],
    (ValueError, AssertionError): [pk.UnsupportedPlatformError],
    (RuntimeError,): [
        pk.KernelCompilationError,
        pk.CompilationError,
        pk.HostCompilerIncompatibleError,
        pk.KernelExecutionError,
        pk.KernelToolchainError,
        pk.NvccNotFoundError,
        pk.HostCompilerNotFoundError,
        pk.HeaderNotFoundError,
        pk.GpuArchDetectionError,
        pk.TuningError,
    ],
    (OSError,): [
        pk.KernelLoadError, pk.CacheError, pk.BenchmarkWriteError, pk.BundleError,
    ],
    (OSError, ValueError): [pk.BundleFormatError, pk.BundleChecksumError],
    (OSError, RuntimeError): [
        pk.BundleMismatchError, pk.BundleMachineError, pk.BundleFfiVersionError,
        pk.BundleGpuArchError,
    ],
    (FileNotFoundError,): [pk.KernelSourceNotFoundError],
    (RuntimeError, ValueError): [pk.UnsupportedArchError, pk.TuningValueError],
    (RuntimeError, TypeError): [pk.TuningTypeError],
    (TypeError, AssertionError): [pk.KernelTypeError],
    (TypeError, ValueError, AssertionError): [
        pk.UnsupportedDtypeError,
        pk.UnsupportedShapeError,
    ],
    (TypeError,): [
        pk.KernelCallError,
        pk.BackendHookError,
        pk.UnsupportedOperationError,
        pk.BenchmarkTypeError,
        pk.CheckTypeError,
    ],
    (TypeError, ValueError): [pk.AttributeValueError],
    (KeyError,): [pk.KernelLookupError],
    (): [pk.BenchmarkError, pk.CheckError],
    (FileNotFoundError, OSError): [pk.BenchmarkFileNotFoundError],
}
BUILTIN_OF = {cls: bases for bases, classes in _BY_BUILTINS.items() for cls in classes}


@pytest.mark.parametrize("name", sorted(REFERENCE_PARENT))
def test_every_reference_name_is_importable_from_polykernel(name):
    cls = getattr(pk, name)
    assert cls is getattr(errors, name)
    assert issubclass(cls, pk.PolykernelError)


@pytest.mark.parametrize(
    ("child", "parent"), list(itertools.permutations(sorted(REFERENCE_PARENT), 2))
)
def test_subclass_relations_match_the_reference(child, parent):
    expected = reference_issubclass(child, parent)
    assert issubclass(getattr(pk, child), getattr(pk, parent)) is expected


def test_the_reference_root_is_our_root():
    assert pk.BrainEventError is pk.PolykernelError


@pytest.mark.parametrize("cls", list(BUILTIN_OF), ids=lambda c: c.__name__)
def test_each_error_is_polykernel_and_builtin(cls):
    assert issubclass(cls, pk.PolykernelError)
    for builtin in BUILTIN_OF[cls]:
        assert issubclass(cls, builtin)
        with pytest.raises(builtin, match="boom"):
            raise cls("boom")


def test_every_public_error_is_covered():
    exported = {getattr(errors, name) for name in errors.__all__}
    exceptions = {
        c for c in exported if issubclass(c, Exception) and not issubclass(c, Warning)
    }
    assert exceptions - {pk.PolykernelError, pk.KernelError} == set(BUILTIN_OF)
    assert all(getattr(pk, name) is getattr(errors, name) for name in errors.__all__)


def test_our_earlier_names_stay():
    assert pk.ToolchainError is pk.KernelToolchainError
    assert issubclass(pk.BackendUnavailableError, pk.KernelNotAvailableError)
    assert issubclass(pk.UnknownBackendError, pk.KernelFallbackExhaustedError)
    assert issubclass(pk.UnknownBackendError, pk.KernelRegistrationError)
    assert issubclass(pk.CacheError, pk.KernelError)
    assert not issubclass(pk.BenchmarkDataFnNotProvidedError, pk.KernelError)


def test_compilation_error_carries_output_source_and_command():
    err = pk.CompilationError(
        "g++ failed",
        output="error: x",
        source_path="/tmp/a.cc",
        command=["g++", "a.cc"],
    )
    assert err.output == err.compiler_output == "error: x"
    assert err.source_path == "/tmp/a.cc"
    assert err.command == ["g++", "a.cc"]
    assert err.stage == "compile"
    assert str(err) == "g++ failed"


def test_compilation_error_accepts_the_reference_arguments():
    err = pk.CompilationError("nvcc failed", "ptxas error", "nvcc a.cu", "link")
    assert (err.compiler_output, err.command, err.stage) == (
        "ptxas error",
        "nvcc a.cu",
        "link",
    )
    err = pk.HostCompilerIncompatibleError("old gcc", compiler_output="x", command="c")
    assert isinstance(err, pk.CompilationError)
    assert err.output == "x"
    arch = pk.UnsupportedArchError("sm_9", compiler_output="o", command="c", stage="s")
    assert (arch.compiler_output, arch.command, arch.stage) == ("o", "c", "s")


def test_lookup_error_message_is_not_quoted():
    assert str(pk.KernelLookupError("no function 'f'")) == "no function 'f'"
