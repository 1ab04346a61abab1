"""Warp backends of the catalog (``scaled_add``, ``lif_step``, ``csrmv``).

Registered by :func:`register` only when warp-lang is installed (checked without
importing it); the Warp kernels themselves are defined on first use, so importing
the catalog never imports Warp. Each backend runs on the CPU through
:func:`polykernel.warp_kernel` (Warp's CPU build behind a native handler) and is
registered for ``gpu`` as well, where it runs Warp's ahead-of-time CUDA build
through the native launcher (built and checked on any machine; launched on an H200
by ``make demo-gpu`` with warp-lang carried there). All three kernels live in this one
Python module, so Warp compiles them as one module, once.
"""

# The kernels are annotated in Warp's own notation, ``wp.array(dtype=...)``: a call,
# which Python's typing does not allow in an annotation (the subscript form
# ``wp.array[...]`` is typed, but polykernel's Warp backend reads the call form).
# pyright: reportInvalidTypeForm=false

from __future__ import annotations

import functools
import types
from typing import Any

__all__ = ["register"]


@functools.cache
def _kernels() -> types.SimpleNamespace:
    from ..backends.warp.types import import_warp

    wp = import_warp()

    @wp.kernel
    def scaled_add(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32),
                   alpha: wp.float32, out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = alpha * x[i] + y[i]

    @wp.kernel
    def lif_step(v: wp.array(dtype=wp.float32), i_ext: wp.array(dtype=wp.float32),
                 tau_inv: wp.float32, v_th: wp.float32, v_rest: wp.float32,
                 dt: wp.float32, v_next: wp.array(dtype=wp.float32),
                 spikes: wp.array(dtype=wp.bool)):  # fmt: skip
        k = wp.tid()
        candidate = v[k] + dt * (-(v[k] - v_rest) * tau_inv + i_ext[k])
        fired = candidate >= v_th
        spikes[k] = fired
        v_next[k] = wp.where(fired, v_rest, candidate)

    @wp.kernel
    def csr_gather(data: wp.array(dtype=wp.float32),
                   indices: wp.array(dtype=wp.int32),
                   indptr: wp.array(dtype=wp.int32), v: wp.array(dtype=wp.float32),
                   out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        acc = wp.float32(0.0)
        for j in range(indptr[i], indptr[i + 1]):
            acc += data[j] * v[indices[j]]
        out[i] = acc

    @wp.kernel
    def csr_scatter(data: wp.array(dtype=wp.float32),
                    indices: wp.array(dtype=wp.int32),
                    indptr: wp.array(dtype=wp.int32), v: wp.array(dtype=wp.float32),
                    zeros: wp.array(dtype=wp.float32),
                    out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()  # one row; rows may add into the same entry: atomics
        vi = v[i]
        for j in range(indptr[i], indptr[i + 1]):
            wp.atomic_add(out, indices[j], data[j] * vi)

    return types.SimpleNamespace(
        scaled_add=scaled_add,
        lif_step=lif_step,
        csr_gather=csr_gather,
        csr_scatter=csr_scatter,
    )


def _flat(out: Any) -> Any:
    """``out`` as a 1-d struct: the elementwise kernels see inputs of any rank flat."""
    import jax

    return jax.ShapeDtypeStruct((int(out.size),), out.dtype)


def _scaled_add(outs: Any, alpha: float, **kwargs: Any) -> Any:
    from ..backends.warp import warp_kernel

    f = warp_kernel(_kernels().scaled_add, _flat(outs[0]))
    shape = outs[0].shape
    return lambda x, y: f(x.reshape(-1), y.reshape(-1), alpha=alpha).reshape(shape)


def _lif_step(outs: Any, **params: Any) -> Any:
    from ..backends.warp import warp_kernel

    f = warp_kernel(_kernels().lif_step, [_flat(o) for o in outs])
    names = ("tau_inv", "v_th", "v_rest", "dt")
    scalars = {k: float(params[k]) for k in names}
    shapes = [o.shape for o in outs]

    def step(v: Any, i_ext: Any) -> Any:
        flat = f(v.reshape(-1), i_ext.reshape(-1), **scalars)
        return [r.reshape(s) for r, s in zip(flat, shapes, strict=True)]

    return step


def _csrmv(outs: Any, transpose: bool, **kwargs: Any) -> Any:
    import jax.numpy as jnp

    from ..backends.warp import warp_kernel

    k = _kernels()
    out = outs[0]
    if not transpose:
        gather = warp_kernel(k.csr_gather, out, launch_dims=out.shape[0])
        return gather

    def scatter(data, indices, indptr, v):
        # XLA does not zero outputs: a zeros input aliased to the output is the
        # accumulator the atomics add into.
        f = warp_kernel(k.csr_scatter, out, launch_dims=indptr.shape[0] - 1,
                        input_output_aliases={4: 0})  # fmt: skip
        return f(data, indices, indptr, v, jnp.zeros(out.shape, out.dtype))

    return scatter


def register(scaled_add_p: Any, lif_step_p: Any, csrmv_p: Any) -> None:
    """Register the Warp backends (``cpu`` and ``gpu``) of the three primitives."""
    for prim, gen in ((scaled_add_p, _scaled_add), (lif_step_p, _lif_step),
                      (csrmv_p, _csrmv)):  # fmt: skip
        prim.def_kernel("warp", "cpu", gen)
        prim.def_warp_kernel(gen)
