"""polykernel: write a JAX primitive once, back it with kernels from many technologies.

``import polykernel`` imports JAX and NumPy only: optional packages (numba, warp,
triton, CUDA) are imported when a backend that needs them is first used, and nothing
touches the disk until a cache is written.

Every name of the reference API's kernel layer is here (and its ``config.*`` setters
under ``polykernel.config`` as well as at top level), so code written for it ports by
changing the import line.
"""

import importlib
from typing import TYPE_CHECKING, Any

from . import backends as backends, config as config, errors, testing as testing
from ._version import __version__ as __version__
from .backends import register_backend as register_backend
from .backends.numba import numba_kernel as numba_kernel
from .benchmark import (
    BenchmarkConfig as BenchmarkConfig,
    BenchmarkRecord as BenchmarkRecord,
    BenchmarkResult as BenchmarkResult,
    benchmark_function as benchmark_function,
)
from .contract import Backend as Backend, BackendKernel as BackendKernel
from .core.bundle import (
    Bundle as Bundle,
    export_bundle as export_bundle,
    load_bundle as load_bundle,
)
from .core.explain import explain_dispatch as explain_dispatch
from .core.exporting import (
    export as export,
    exported_targets as exported_targets,
    load_exported as load_exported,
    register_exported_targets as register_exported_targets,
)
from .core.kernel_table import KernelEntry as KernelEntry
from .core.primitive import XLACustomKernel as XLACustomKernel
from .core.registry import (
    get_all_primitive_names as get_all_primitive_names,
    get_primitive as get_primitive,
    get_primitives_by_tags as get_primitives_by_tags,
    get_registry as get_registry,
)
from .core.transforms import (
    defjvp as defjvp,
    general_batching_rule as general_batching_rule,
)
from .dispatch import Dispatch as Dispatch
from .errors import *  # noqa: F403  (every class of errors.__all__)
from .ffi.targets import list_registered_targets as list_registered_targets
from .settings.allocator import tune_allocator as tune_allocator
from .settings.paths import (
    get_cache_dir as get_cache_dir,
    set_cache_dir as set_cache_dir,
)
from .settings.preferences import (
    clear_backends as clear_backends,
    get_backend as get_backend,
    get_compute_capability as get_compute_capability,
    get_numba_num_threads as get_numba_num_threads,
    get_numba_parallel as get_numba_parallel,
    set_backend as set_backend,
    set_compute_capability as set_compute_capability,
    set_numba_parallel as set_numba_parallel,
)

# Every public name, the lazy ones included: `from polykernel import *` and the API
# reference (docs/api/) read this list. Each name is listed once more where it comes
# from (an import above, the lazy table below with its TYPE_CHECKING mirror, or
# errors.__all__); tests/core/test_import.py checks that these lists agree.
__all__ = [
    "Backend",
    "BackendKernel",
    "BenchmarkConfig",
    "BenchmarkRecord",
    "BenchmarkResult",
    "Bundle",
    "CPPBackend",
    "CUDABackend",
    "CompileOptions",
    "CompiledModule",
    "CompilerBackend",
    "Dispatch",
    "HIPBackend",
    "KernelEntry",
    "NativeModule",
    "XLACustomKernel",
    "__version__",
    "backends",
    "benchmark_function",
    "clear_backends",
    "clear_cache",
    "config",
    "defjvp",
    "explain_dispatch",
    "export",
    "export_bundle",
    "exported_targets",
    "general_batching_rule",
    "get_all_primitive_names",
    "get_backend",
    "get_cache_dir",
    "get_compute_capability",
    "get_numba_num_threads",
    "get_numba_parallel",
    "get_primitive",
    "get_primitives_by_tags",
    "get_registry",
    "jaxinfo_to_warpinfo",
    "jaxtype_to_warptype",
    "list_registered_targets",
    "load_bundle",
    "load_cpp_file",
    "load_cpp_inline",
    "load_cuda_dir",
    "load_cuda_file",
    "load_cuda_inline",
    "load_exported",
    "normalize_tokens",
    "numba_cuda_callable",
    "numba_cuda_kernel",
    "numba_kernel",
    "pallas_kernel",
    "print_diagnostics",
    "register_backend",
    "register_exported_targets",
    "register_ffi_target",
    "set_backend",
    "set_cache_dir",
    "set_compute_capability",
    "set_numba_parallel",
    "so_ext",
    "testing",
    "triton_kernel",
    "tune_allocator",
    "warp_kernel",
]
__all__ += errors.__all__  # the exception and warning classes, listed there once

# The GPU-technology wrappers and the C++/CUDA loaders load on first use (PEP 562):
# `import polykernel` does not pay for their modules (the Numba-CUDA package pulls
# in the GPU launcher, the loaders the native build path).
_LAZY = {
    "CompiledModule": ".backends.cuda_raw",
    "NativeModule": ".backends.cuda_raw",
    "load_cpp_file": ".backends.cuda_raw",
    "load_cpp_inline": ".backends.cuda_raw",
    "load_cuda_dir": ".backends.cuda_raw",
    "load_cuda_file": ".backends.cuda_raw",
    "load_cuda_inline": ".backends.cuda_raw",
    "normalize_tokens": ".backends.cuda_raw",
    "register_ffi_target": ".backends.cuda_raw",
    "CompileOptions": ".native",
    "CompilerBackend": ".native",
    "CPPBackend": ".native",
    "CUDABackend": ".native",
    "HIPBackend": ".native",
    "clear_cache": ".native",
    "print_diagnostics": ".native",
    "so_ext": ".native",
    "numba_cuda_callable": ".backends.numba_cuda",
    "numba_cuda_kernel": ".backends.numba_cuda",
    "pallas_kernel": ".backends.pallas",
    "triton_kernel": ".backends.triton",
    "jaxinfo_to_warpinfo": ".backends.warp",
    "jaxtype_to_warptype": ".backends.warp",
    "warp_kernel": ".backends.warp",
}

if TYPE_CHECKING:
    from .backends.cuda_raw import (
        CompiledModule as CompiledModule,
        NativeModule as NativeModule,
        load_cpp_file as load_cpp_file,
        load_cpp_inline as load_cpp_inline,
        load_cuda_dir as load_cuda_dir,
        load_cuda_file as load_cuda_file,
        load_cuda_inline as load_cuda_inline,
        normalize_tokens as normalize_tokens,
        register_ffi_target as register_ffi_target,
    )
    from .backends.numba_cuda import (
        numba_cuda_callable as numba_cuda_callable,
        numba_cuda_kernel as numba_cuda_kernel,
    )
    from .backends.pallas import pallas_kernel as pallas_kernel
    from .backends.triton import triton_kernel as triton_kernel
    from .backends.warp import (
        jaxinfo_to_warpinfo as jaxinfo_to_warpinfo,
        jaxtype_to_warptype as jaxtype_to_warptype,
        warp_kernel as warp_kernel,
    )
    from .native import (
        CompileOptions as CompileOptions,
        CompilerBackend as CompilerBackend,
        CPPBackend as CPPBackend,
        CUDABackend as CUDABackend,
        HIPBackend as HIPBackend,
        clear_cache as clear_cache,
        print_diagnostics as print_diagnostics,
        so_ext as so_ext,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'polykernel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
