"""The ``pallas`` backend: Pallas kernel bodies, interpreted on CPU, compiled on
GPU/TPU.

- :mod:`.kernel`: :func:`pallas_kernel` / :class:`PallasKernel` (the ``pallas_call``
  for the platform being lowered);
- :mod:`.lowering`: the abstract GPU target a CUDA lowering needs without a GPU,
  :func:`lower_for_cuda`;
- :mod:`.info`, :mod:`.backend`: its rows of ``polykernel info``, its protocol object.

See ``docs/pallas.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .kernel import PallasKernel, pallas_kernel
    from .lowering import AOT_GPU, TRITON_TARGET, lower_for_cuda, lowering_context

# Imported on first use: looking the backend up imports none of its modules.
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "AOT_GPU": "lowering",
        "PallasKernel": "kernel",
        "TRITON_TARGET": "lowering",
        "lower_for_cuda": "lowering",
        "lowering_context": "lowering",
        "pallas_kernel": "kernel",
    },
)

__all__ = [
    "AOT_GPU",
    "TRITON_TARGET",
    "PallasKernel",
    "lower_for_cuda",
    "lowering_context",
    "pallas_kernel",
]
