"""Raw C++/CUDA kernels as XLA FFI targets: load, compile, cache, register, call.

See ``docs/native.md``. Importing this package runs no compiler and touches no disk.
"""

from __future__ import annotations

from .compiler import CompileOptions
from .loader import load_cpp_file, load_cpp_inline, load_cuda_file, load_cuda_inline
from .module import NativeFunction, NativeModule

__all__ = [
    "CompileOptions",
    "NativeFunction",
    "NativeModule",
    "load_cpp_file",
    "load_cpp_inline",
    "load_cuda_file",
    "load_cuda_inline",
]
