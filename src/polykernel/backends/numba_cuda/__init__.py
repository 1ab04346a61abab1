"""The Numba-CUDA backend: ``numba_cuda_kernel`` and ``numba_cuda_callable``.

- :mod:`.kernel`: :func:`numba_cuda_kernel` (native launch on GPU, simulator on CPU);
- :mod:`.callable`: :func:`numba_cuda_callable` (a Python function launching kernels);
- :mod:`.compile`: PTX/cubin per architecture; :mod:`.numpy_shim` for NumPy >= 2.5;
- :mod:`.array_abi`, :mod:`.launch_config`: pure launch-parameter arithmetic;
- :mod:`.cpu`: Numba's CUDA simulator without ``NUMBA_ENABLE_CUDASIM``.

Importing this package imports neither Numba nor CUDA (see ``docs/gpu.md``).
"""

from __future__ import annotations

from .callable import numba_cuda_callable
from .kernel import NumbaCudaKernel, numba_cuda_kernel

__all__ = ["NumbaCudaKernel", "numba_cuda_callable", "numba_cuda_kernel"]
