"""The Numba-CUDA backend: ``numba_cuda_kernel`` and ``numba_cuda_callable``.

- :mod:`.kernel`: :func:`numba_cuda_kernel` (native launch on GPU, simulator on CPU);
- :mod:`.callable`: :func:`numba_cuda_callable` (a Python function launching kernels);
- :mod:`.compile`: PTX/cubin per architecture, kept in the launcher's build cache
  under a content key (:mod:`.fingerprint`); :mod:`.numpy_shim` for NumPy >= 2.5;
- :mod:`.array_abi`, :mod:`.launch_config`: pure launch-parameter arithmetic;
- :mod:`.cpu`: Numba's CUDA simulator without ``NUMBA_ENABLE_CUDASIM``.

Importing this package imports neither Numba nor CUDA (see ``docs/gpu.md``), nor
any of its modules: each public name is imported from its module when first asked
for, so a process that lowers a ``numba_cuda_kernel`` from the cache does not pay
for the callable's Python handler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .callable import numba_cuda_callable
    from .kernel import NumbaCudaKernel, numba_cuda_kernel

#: public name -> the module of this package that defines it.
_LAZY = {
    "NumbaCudaKernel": "kernel",
    "numba_cuda_callable": "callable",
    "numba_cuda_kernel": "kernel",
}

__all__ = ["NumbaCudaKernel", "numba_cuda_callable", "numba_cuda_kernel"]


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
