"""The ``triton`` backend: ``@triton.jit`` kernels, launched natively on GPU,
interpreted on CPU.

- :mod:`.kernel`: :func:`triton_kernel` / :class:`TritonKernel`;
- :mod:`.source`: ``@triton.jit`` and ``TRITON_INTERPRET=1`` kernels alike;
- :mod:`.params`: signature and launch parameters (pure); :mod:`.compile`: cubins
  ahead of the call; :mod:`.gpu`: registration with the native launcher;
- :mod:`.cpu`: Triton's interpreter on host arrays (the CPU path);
- :mod:`.backend`: the backend's protocol object.

Importing this package imports no Triton. See ``docs/triton.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .kernel import TritonKernel, import_triton, target_arch, triton_kernel

# Imported on first use: looking the backend up imports none of its modules.
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "TritonKernel": "kernel",
        "import_triton": "kernel",
        "target_arch": "kernel",
        "triton_kernel": "kernel",
    },
)

__all__ = ["TritonKernel", "import_triton", "target_arch", "triton_kernel"]
