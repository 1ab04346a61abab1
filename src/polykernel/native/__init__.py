"""Raw C++/CUDA kernels as XLA FFI targets: load, compile, cache, register, call.

See ``docs/native.md``. Importing this package runs no compiler and touches no disk.
"""

from __future__ import annotations

from .cache import clear_cache
from .compiled import CompiledModule
from .compiler import CompileOptions
from .compiler_backends import (
    CompilerBackend,
    CPPBackend,
    CUDABackend,
    HIPBackend,
    so_ext,
)
from .diagnostics import diagnostics, print_diagnostics
from .directory import load_cuda_dir
from .loader import load_cpp_file, load_cpp_inline, load_cuda_file, load_cuda_inline
from .module import NativeFunction, NativeModule
from .runtime import list_registered_targets, register_ffi_target
from .tokens import normalize_tokens

__all__ = [
    "CPPBackend",
    "CUDABackend",
    "CompileOptions",
    "CompiledModule",
    "CompilerBackend",
    "HIPBackend",
    "NativeFunction",
    "NativeModule",
    "clear_cache",
    "diagnostics",
    "list_registered_targets",
    "load_cpp_file",
    "load_cpp_inline",
    "load_cuda_dir",
    "load_cuda_file",
    "load_cuda_inline",
    "normalize_tokens",
    "print_diagnostics",
    "register_ffi_target",
    "so_ext",
]
