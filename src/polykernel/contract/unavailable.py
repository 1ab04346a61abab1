"""A kernel path this process cannot build, failing only where it is used.

A kernel with a CPU and a GPU path, called on its own where JAX sees a GPU, is
traced for both platforms (``jax.lax.platform_dependent``: the data's device picks
one when the program is lowered). If the GPU path cannot be built here (Triton under
``TRITON_INTERPRET=1``, a GPU compiler missing), a call on CPU data must still run:
the GPU branch becomes :func:`unavailable_path`, a primitive with the path's output
types whose lowering raises the build error -- so the error reaches the user exactly
when a program is lowered for that platform, and never otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import _jax_compat as jc

__all__ = ["unavailable_path"]


class _Held:
    """Holds the build error as a primitive parameter (hashable by identity)."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error

    def __repr__(self) -> str:  # shown in printed jaxprs
        return f"<{type(self.error).__name__}>"


def _abstract_eval(*, held: _Held, avals: tuple) -> list[Any]:
    return [jc.ShapedArray(shape, dtype) for shape, dtype in avals]


def _refuse(ctx: Any, *, held: _Held, avals: tuple) -> list[Any]:
    raise held.error


_primitive = jc.Primitive("polykernel_unavailable_path")
_primitive.multiple_results = True
_primitive.def_abstract_eval(_abstract_eval)
jc.register_lowering(_primitive, _refuse)


def unavailable_path(error: Exception, structs: Sequence[Any]) -> list[Any]:
    """Outputs shaped like ``structs`` whose lowering raises ``error``."""
    avals = tuple((tuple(s.shape), np.dtype(s.dtype)) for s in structs)
    return _primitive.bind(held=_Held(error), avals=avals)
