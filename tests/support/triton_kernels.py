"""Triton kernels the Triton tests share (import after ``importorskip("triton")``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import polykernel as pk


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, alpha * x + y, mask=mask)


def axpy_kernel(n: int, block: int, **kw):
    """``axpy`` over ``n`` float32 elements, a program per ``block`` of them."""
    grid = lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),)  # noqa: E731
    return pk.triton_kernel(
        axpy, jax.ShapeDtypeStruct((n,), jnp.float32), grid=grid, BLOCK=block, **kw
    )
