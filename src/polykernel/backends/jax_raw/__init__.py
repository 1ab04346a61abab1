"""The ``jax_raw`` backend: a pure-JAX kernel, the reference the others are checked
against.

A ``jax_raw`` generator returns a JAX-traceable function, lowered as it is: no
artefact, no FFI target, every platform. :mod:`.backend` holds its protocol object;
:mod:`.kernel` its wrapper, :func:`~.kernel.jax_raw_kernel`, which puts such a
function under the rules every backend's kernels follow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_names

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .kernel import JaxRawKernel, jax_raw_kernel

# Imported on first use: looking the backend up imports none of its modules.
__getattr__, __dir__ = lazy_names(
    __name__,
    {
        "JaxRawKernel": "kernel",
        "jax_raw_kernel": "kernel",
    },
)

__all__ = ["JaxRawKernel", "jax_raw_kernel"]
