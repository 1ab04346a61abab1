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

from .kernel import TritonKernel, import_triton, target_arch, triton_kernel

__all__ = ["TritonKernel", "import_triton", "target_arch", "triton_kernel"]
