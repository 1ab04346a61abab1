"""polykernel: write a JAX primitive once, back it with kernels from many technologies.

``import polykernel`` imports JAX and NumPy only: optional packages (numba, warp,
triton, CUDA) are imported when a backend that needs them is first used, and nothing
touches the disk until a cache is written.
"""

from ._version import __version__ as __version__
from .errors import (
    BackendUnavailableError as BackendUnavailableError,
    BenchmarkDataFnNotProvidedError as BenchmarkDataFnNotProvidedError,
    CacheError as CacheError,
    CompilationError as CompilationError,
    KernelCompilationError as KernelCompilationError,
    KernelExecutionError as KernelExecutionError,
    KernelNotAvailableError as KernelNotAvailableError,
    KernelRegistrationError as KernelRegistrationError,
    PolykernelError as PolykernelError,
    ToolchainError as ToolchainError,
    UnsupportedTransformError as UnsupportedTransformError,
)
from .kernel_table import KernelEntry as KernelEntry
from .primitive import XLACustomKernel as XLACustomKernel
from .transforms import (
    defjvp as defjvp,
    general_batching_rule as general_batching_rule,
)
