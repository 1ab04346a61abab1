"""Gradients of a function under test against those of its plain-JAX reference."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np


def assert_grads_match(
    f: Callable[..., Any],
    reference: Callable[..., Any],
    args: Sequence[Any],
    *,
    rtol: float,
    atol: float,
    argnums: Sequence[int] = (0, 1),
) -> None:
    """``jax.grad`` of ``f`` equals that of ``reference`` at ``args``, for each
    argument in ``argnums`` on its own."""
    for argnum in argnums:
        np.testing.assert_allclose(
            jax.grad(f, argnum)(*args),
            jax.grad(reference, argnum)(*args),
            rtol=rtol,
            atol=atol,
        )
