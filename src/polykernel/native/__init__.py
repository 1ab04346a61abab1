"""The one native build path: toolchains, compiler driver, build, content-keyed cache.

- :mod:`.toolchain`: host compiler and nvcc discovery, fingerprints, CUDA arches;
- :mod:`.compiler`: :class:`CompileOptions` and the command line;
- :mod:`.build`: look up, lock, build in a temporary directory, publish — used by the
  ``cuda_raw`` loaders and the GPU launcher alike;
- :mod:`.cache`: the ``native/`` section of the cache root;
- :mod:`.compiler_backends`: the reference's ``CPPBackend``/``CUDABackend``/
  ``HIPBackend`` compiler drivers; :mod:`.diagnostics`: ``print_diagnostics``.

Importing this package runs no compiler and touches no disk.
"""

from __future__ import annotations

from .cache import clear_cache
from .compiler import CompileOptions
from .compiler_backends import (
    CompilerBackend,
    CPPBackend,
    CUDABackend,
    HIPBackend,
    so_ext,
)
from .diagnostics import diagnostics, print_diagnostics

__all__ = [
    "CPPBackend",
    "CUDABackend",
    "CompileOptions",
    "CompilerBackend",
    "HIPBackend",
    "clear_cache",
    "diagnostics",
    "print_diagnostics",
    "so_ext",
]
