"""The exception hierarchy: every class is a PolykernelError and its fitting builtin."""

from __future__ import annotations

import pytest

import polykernel as pk
from polykernel import errors

BUILTIN_OF = {
    pk.KernelRegistrationError: ValueError,
    pk.KernelCallError: TypeError,
    pk.KernelNotAvailableError: NotImplementedError,
    pk.KernelCompilationError: RuntimeError,
    pk.KernelExecutionError: RuntimeError,
    pk.BackendUnavailableError: ImportError,
    pk.ToolchainError: RuntimeError,
    pk.CompilationError: RuntimeError,
    pk.CacheError: OSError,
    pk.BenchmarkDataFnNotProvidedError: ValueError,
    pk.UnsupportedTransformError: NotImplementedError,
}


@pytest.mark.parametrize("cls", list(BUILTIN_OF), ids=lambda c: c.__name__)
def test_each_error_is_polykernel_and_builtin(cls):
    assert issubclass(cls, pk.PolykernelError)
    assert issubclass(cls, BUILTIN_OF[cls])
    with pytest.raises(BUILTIN_OF[cls], match="boom"):
        raise cls("boom")


def test_every_public_error_is_covered():
    exported = {getattr(errors, name) for name in errors.__all__}
    exceptions = {
        c for c in exported if issubclass(c, Exception) and not issubclass(c, Warning)
    }
    assert exceptions - {pk.PolykernelError} == set(BUILTIN_OF)


def test_compilation_error_carries_output_source_and_command():
    err = pk.CompilationError(
        "g++ failed",
        output="error: x",
        source_path="/tmp/a.cc",
        command=["g++", "a.cc"],
    )
    assert err.output == "error: x"
    assert err.source_path == "/tmp/a.cc"
    assert err.command == ["g++", "a.cc"]
    assert str(err) == "g++ failed"
