"""The reference API's compiler drivers, on top of polykernel's compiler driver.

``CPPBackend`` and ``CUDABackend`` compile a complete translation unit (user code
plus FFI wrappers, or any code including ``polykernel.h`` / jaxlib's FFI headers)
into a shared library with the same command lines ``load_*`` uses
(:func:`~polykernel.native.compiler.build_command`); ``HIPBackend`` is not
implemented, as in the reference. ``load_*`` do not go through these classes: they
are for users who drive compilation themselves.
"""

from __future__ import annotations

import os
import shlex
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from ..errors import (
    CompilationError,
    KernelRegistrationError,
    KernelToolchainError,
    KernelTypeError,
    UnsupportedFeatureError,
)
from .compiler import CompileOptions, build_command, classify_failure, run_compiler
from .toolchain import find_host_compiler, find_nvcc, normalize_arch

__all__ = ["CPPBackend", "CUDABackend", "CompilerBackend", "HIPBackend", "so_ext"]


def so_ext() -> str:
    """The shared-library suffix of this OS: ``.so``, ``.dylib`` or ``.dll``.

    Raises:
        KernelToolchainError: the OS is none of Linux, macOS, Windows.

    Example:
        >>> from polykernel import so_ext
        >>> so_ext() in (".so", ".dylib", ".dll")
        True
    """
    if sys.platform.startswith("linux"):
        return ".so"
    if sys.platform == "darwin":
        return ".dylib"
    if sys.platform == "win32":
        return ".dll"
    raise KernelToolchainError(
        f"polykernel.native: no shared-library suffix known for OS {sys.platform!r}; "
        "native kernels are supported on Linux, macOS and Windows."
    )


class CompilerBackend(ABC):
    """A compiler driver: turns one source text into a shared library.

    Attributes:
        platform_name: ``"cpu"``, ``"cuda"`` or ``"hip"``.
    """

    platform_name: str = "unknown"

    @abstractmethod
    def compile_source(
        self, source: str, output_path: str, build_dir: str, **kwargs: Any
    ) -> str:
        """Compile ``source`` into the library ``output_path``; return its path.

        ``build_dir`` receives the source file (kept for inspection).
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}(platform={self.platform_name!r})"


def _tool(toolchain: Any, attribute: str) -> str | None:
    """A compiler path from ``toolchain``: a path string or an object attribute."""
    if toolchain is None:
        return None
    if isinstance(toolchain, (str, os.PathLike)):
        return os.fspath(toolchain)
    return getattr(toolchain, attribute, None)


def _reject_unknown(where: str, kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise KernelTypeError(
            f"{where}.compile_source: unknown keyword argument(s) {sorted(kwargs)}."
        )


def _check_inputs(where: str, source: object, paths: dict, lists: dict) -> None:
    """Wrong argument types as our TypeError naming the argument, before any work."""
    if not isinstance(source, str):
        raise KernelTypeError(
            f"{where}.compile_source: source must be the source text (str), got "
            f"{type(source).__name__}."
        )
    for name, value in paths.items():
        if not isinstance(value, str | os.PathLike):
            raise KernelTypeError(
                f"{where}.compile_source: {name} must be a path (str or os.PathLike), "
                f"got {type(value).__name__} {value!r}."
            )
    for name, value in lists.items():
        if value is not None and (
            isinstance(value, str)
            or not isinstance(value, list | tuple)
            or not all(isinstance(v, str) for v in value)
        ):
            raise KernelTypeError(
                f"{where}.compile_source: {name} must be a list of strings or None, "
                f"got {type(value).__name__} {value!r}."
            )


def _check_level(where: str, level: object) -> int:
    if isinstance(level, bool) or level not in (0, 1, 2, 3):
        raise KernelRegistrationError(
            f"{where}.compile_source: optimization_level must be 0, 1, 2 or 3 (got "
            f"{level!r})."
        )
    return int(level)


def _compile(
    where: str,
    platform: str,
    compiler: str,
    options: CompileOptions,
    arches: tuple[str, ...],
    paths: tuple[str, str, str],
    verbose: bool,
) -> str:
    source, output_path, build_dir = paths
    os.makedirs(build_dir, exist_ok=True)
    out_dir = os.path.dirname(os.path.abspath(output_path))
    os.makedirs(out_dir, exist_ok=True)
    src = Path(build_dir) / ("kernel.cu" if platform == "cuda" else "kernel.cpp")
    src.write_text(source, encoding="utf-8")
    cmd = build_command(
        platform, compiler, options, arches, str(src), output_path, hide_symbols=False
    )
    if verbose:
        print(f"{where} command:\n  {shlex.join(cmd)}")
    try:
        run_compiler(where, cmd, src, options.timeout)
    except CompilationError as err:
        raise classify_failure(err) from err
    return str(output_path)


class CPPBackend(CompilerBackend):
    """Compile C++ for the CPU with g++ / clang++ (``-O3`` unless told otherwise).

    Args:
        toolchain: The host compiler: ``None`` (``$CXX``, g++, clang++), a path, or an
            object with a ``cxx`` attribute (the reference's ``CppToolchain``).

    Example:
        >>> import os
        >>> from polykernel import CPPBackend
        >>> os.makedirs("build", exist_ok=True)
        >>> CPPBackend().compile_source('extern "C" int answer() { return 42; }',
        ...                             "out/libanswer.so", "build")
        'out/libanswer.so'
    """

    platform_name = "cpu"

    def __init__(self, toolchain: Any = None) -> None:
        self.toolchain = toolchain
        self.cxx = find_host_compiler(_tool(toolchain, "cxx"))

    def compile_source(
        self,
        source: str,
        output_path: str,
        build_dir: str,
        *,
        extra_cflags: list[str] | None = None,
        extra_ldflags: list[str] | None = None,
        extra_include_paths: list[str] | None = None,
        verbose: bool = False,
        optimization_level: int = 3,
        use_fast_math: bool = False,
        **kwargs: Any,
    ) -> str:
        """Compile ``source`` to the shared library ``output_path``; return its path.

        Raises:
            CompilationError: the compiler failed (its output is in the message).
        """
        _reject_unknown("CPPBackend", kwargs)
        _check_inputs(
            "CPPBackend",
            source,
            {"output_path": output_path, "build_dir": build_dir},
            {
                "extra_cflags": extra_cflags,
                "extra_ldflags": extra_ldflags,
                "extra_include_paths": extra_include_paths,
            },
        )
        options = CompileOptions(
            optimization=_check_level("CPPBackend", optimization_level),
            fast_math=use_fast_math,
            extra_cflags=tuple(extra_cflags or ()),
            include_paths=tuple(extra_include_paths or ()),
            ldflags=tuple(extra_ldflags or ()),
        )
        paths = (source, str(output_path), str(build_dir))
        return _compile("CPPBackend", "cpu", self.cxx, options, (), paths, verbose)


class CUDABackend(CompilerBackend):
    """Compile CUDA with nvcc for the given architectures (plus PTX of the newest).

    Args:
        toolchain: ``None`` (discover nvcc), nvcc's path, or an object with ``nvcc``
            and optionally ``cxx`` attributes (the reference's ``CudaToolchain``).
    """

    platform_name = "cuda"

    def __init__(self, toolchain: Any = None) -> None:
        self.toolchain = toolchain
        self.nvcc = find_nvcc(_tool(toolchain, "nvcc"))
        self.cxx = None if isinstance(toolchain, str) else _tool(toolchain, "cxx")

    def compile_source(
        self,
        source: str,
        output_path: str,
        build_dir: str,
        *,
        extra_cuda_cflags: list[str] | None = None,
        extra_ldflags: list[str] | None = None,
        extra_include_paths: list[str] | None = None,
        verbose: bool = False,
        gpu_arch: str | list[str] = "sm_80",
        optimization_level: int = 3,
        use_fast_math: bool = False,
        **kwargs: Any,
    ) -> str:
        """Compile ``source`` with nvcc to ``output_path``; return its path.

        Raises:
            UnsupportedArchError: ``gpu_arch`` is malformed or unknown to this nvcc.
            HostCompilerIncompatibleError: nvcc rejects the host compiler.
            CompilationError: any other compiler failure.
        """
        _reject_unknown("CUDABackend", kwargs)
        _check_inputs(
            "CUDABackend",
            source,
            {"output_path": output_path, "build_dir": build_dir},
            {
                "extra_cuda_cflags": extra_cuda_cflags,
                "extra_ldflags": extra_ldflags,
                "extra_include_paths": extra_include_paths,
            },
        )
        arch_list = [gpu_arch] if isinstance(gpu_arch, str) else list(gpu_arch)
        arches = tuple(normalize_arch(a) for a in arch_list)
        options = CompileOptions(
            optimization=_check_level("CUDABackend", optimization_level),
            fast_math=use_fast_math,
            extra_cflags=tuple(extra_cuda_cflags or ()),
            include_paths=tuple(extra_include_paths or ()),
            ldflags=tuple(extra_ldflags or ()),
            cuda_arch=arches,
            compiler=self.cxx,
        )
        paths = (source, str(output_path), str(build_dir))
        nvcc = self.nvcc
        return _compile("CUDABackend", "cuda", nvcc, options, arches, paths, verbose)


class HIPBackend(CompilerBackend):
    """AMD HIP: not implemented (as in the reference); ``compile_source`` raises."""

    platform_name = "hip"

    def compile_source(
        self, source: str, output_path: str, build_dir: str, **kwargs: Any
    ) -> str:
        """Raise :class:`~polykernel.errors.UnsupportedFeatureError`."""
        raise UnsupportedFeatureError(
            "HIPBackend.compile_source: polykernel cannot compile HIP for AMD GPUs "
            "yet. Use CUDABackend (NVIDIA) or CPPBackend (CPU), or write the kernel "
            "in Triton, whose compiler supports ROCm."
        )
