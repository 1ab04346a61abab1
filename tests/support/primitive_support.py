"""What the ``XLACustomKernel`` tests share: fresh primitives and kernel generators."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp

import polykernel as pk

_ids = itertools.count()
SPEC = jax.ShapeDtypeStruct((4,), jnp.float32)


def new_op(prefix: str = "op") -> pk.XLACustomKernel:
    """A primitive of a name no other test uses."""
    return pk.XLACustomKernel(f"test.primitive.{prefix}{next(_ids)}")


def scale_gen(factor: float):
    """A kernel generator whose kernel multiplies its input by ``factor``."""

    def generator(outs, **kwargs):
        return lambda x: x * factor

    return generator
