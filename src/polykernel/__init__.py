"""polykernel: write a JAX primitive once, back it with kernels from many technologies.

``import polykernel`` imports JAX and NumPy only: optional packages (numba, warp,
triton, CUDA) are imported when a backend that needs them is first used, and nothing
touches the disk until a cache is written.
"""

from . import testing as testing
from ._version import __version__ as __version__
from .allocator import tune_allocator as tune_allocator
from .backends.numba_cpu import numba_kernel as numba_kernel
from .benchmark import (
    BenchmarkConfig as BenchmarkConfig,
    BenchmarkRecord as BenchmarkRecord,
    BenchmarkResult as BenchmarkResult,
    benchmark_function as benchmark_function,
)
from .errors import (
    BackendUnavailableError as BackendUnavailableError,
    BenchmarkDataFnNotProvidedError as BenchmarkDataFnNotProvidedError,
    BenchmarkMismatchWarning as BenchmarkMismatchWarning,
    CacheError as CacheError,
    CompilationError as CompilationError,
    DuplicatePrimitiveWarning as DuplicatePrimitiveWarning,
    KernelCallError as KernelCallError,
    KernelCompilationError as KernelCompilationError,
    KernelExecutionError as KernelExecutionError,
    KernelNotAvailableError as KernelNotAvailableError,
    KernelRegistrationError as KernelRegistrationError,
    PolykernelError as PolykernelError,
    PolykernelWarning as PolykernelWarning,
    ToolchainError as ToolchainError,
    UnsupportedTransformError as UnsupportedTransformError,
)
from .kernel_table import KernelEntry as KernelEntry
from .native import (
    CompileOptions as CompileOptions,
    NativeModule as NativeModule,
    load_cpp_file as load_cpp_file,
    load_cpp_inline as load_cpp_inline,
    load_cuda_file as load_cuda_file,
    load_cuda_inline as load_cuda_inline,
)
from .primitive import XLACustomKernel as XLACustomKernel
from .registry import (
    get_all_primitive_names as get_all_primitive_names,
    get_primitive as get_primitive,
    get_primitives_by_tags as get_primitives_by_tags,
    get_registry as get_registry,
)
from .transforms import (
    defjvp as defjvp,
    general_batching_rule as general_batching_rule,
)
