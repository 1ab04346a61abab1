"""One tiny kernel per backend for the conformance table (``tests/contract``).

Every backend — the seven built-in ones and the out-of-tree ctypes plugin — gets the
same kernel: one input ``x``, one output, one float scalar ``alpha``, computing
``out = alpha * x``. A :class:`Subject` is one line: how to make the kernel with the
options every wrapper takes (``vmap_method``, ``input_output_aliases``, its launch
parameter), and the facts its technology decides, which are the table's only
per-backend columns:

- ``rule``: the dtype of ``alpha`` — declared ``float32`` (Warp annotation, native
  spec, the plugin's declaration), inferred from the value by Numba's rule (a Python
  ``int`` int64, a ``float`` float64; Numba-CUDA's also takes float16), by Triton's
  (int32 when it fits, a ``float`` float32), or ``static`` (a Python value JAX
  traces the body with: Pallas, jax_raw);
- ``refused``: an output dtype the technology cannot take (None: it takes every
  dtype JAX has);
- ``launch``: its launch parameter and how many axes it has, if it has one;
- ``host_callback``: its CPU path runs behind ``jax.pure_callback`` (the CPU
  emulators of GPU technologies, the plugin), which ``jax.export`` cannot
  serialise.

Kernels are made once per (subject, outs, options) and shared across rows. GPU
technologies run on their CPU paths: Numba-CUDA's simulator, Triton's interpreter,
Warp's CPU device, Pallas' interpret mode.
"""

from __future__ import annotations

import functools
import math
import numbers
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk

S = jax.ShapeDtypeStruct
F3 = S((3,), jnp.float32)


def gain(alpha: Any) -> float:
    """What a static-rule body multiplies by: a real ``alpha`` (bools included) as a
    float, anything else 1 (the body must trace with whatever it is given)."""
    if isinstance(alpha, bool | numbers.Real):
        try:
            return float(alpha)
        except OverflowError:
            return math.inf
    return 1.0


@dataclass(eq=False)
class Subject:
    """One backend's line of the table (see the module docstring)."""

    name: str
    build: Callable[..., Any]  # build(outs, **options) -> f(x, **keywords)
    rule: str  # "float32", "numba", "numba_cuda", "triton" or "static"
    refused: str | None
    launch: tuple[str, int] | None = None
    host_callback: bool = False
    needs: tuple[str, ...] = ()  # modules or programs it needs
    seen: list[Any] = field(default_factory=list)  # what a static body was given
    made: dict[Any, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return self.name

    def kernel(self, outs: Any = F3, **options: Any) -> Any:
        """The kernel for ``outs`` and ``options`` (made once, then shared)."""
        self.require()
        try:
            key = (outs, repr(sorted(options.items())))
            hash(key)
        except TypeError:  # a malformed outs row: never shared
            return self.build(outs, **options)
        if key not in self.made:
            self.made[key] = self.build(outs, **options)
        return self.made[key]

    def require(self) -> None:
        for need in self.needs:
            if need in ("gcc", "g++"):
                if shutil.which(need) is None:
                    pytest.skip(f"needs {need}")
            else:
                pytest.importorskip(need)


# -- the kernels --------------------------------------------------------------------
def _numba(outs: Any, **options: Any) -> Any:
    import numba

    return pk.numba_kernel(_numba_scale(numba), outs, **options)


@functools.cache
def _numba_scale(numba: Any) -> Any:
    @numba.njit
    def scale(x, out, alpha):
        for i in range(out.size):
            out[i] = alpha * x[i]

    return scale


def _size(outs: Any) -> int:
    """How many elements the output has (3 for a malformed ``outs`` row)."""
    try:
        size = int(np.prod(outs.shape))
    except (AttributeError, TypeError, ValueError):
        return 3
    return size if size >= 0 else 3


def _numba_cuda(outs: Any, **options: Any) -> Any:
    options.setdefault("launch_dims", _size(outs))
    return pk.numba_cuda_kernel(_cuda_scale(), outs, **options)


@functools.cache
def _cuda_scale() -> Any:
    from numba import cuda

    @cuda.jit
    def scale(x, out, alpha):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = alpha * x[i]

    return scale


def _warp(outs: Any, **options: Any) -> Any:
    return pk.warp_kernel(_warp_scale(), outs, **options)


@functools.cache
def _warp_scale() -> Any:
    import warp as wp

    @wp.kernel
    def scale(x: wp.array(dtype=wp.float32), alpha: wp.float32,
              out: wp.array(dtype=wp.float32)):  # fmt: skip
        i = wp.tid()
        out[i] = alpha * x[i]

    return scale


def _pallas(outs: Any, **options: Any) -> Any:
    seen = SUBJECTS_BY_NAME["pallas"].seen

    def scale(x_ref, o_ref, alpha):
        seen.append(alpha)
        o_ref[...] = gain(alpha) * x_ref[...]

    return pk.pallas_kernel(scale, outs, **options)


def _triton(outs: Any, **options: Any) -> Any:
    options.setdefault("grid", 1)
    return pk.triton_kernel(_triton_scale(), outs, BLOCK=4, N=_size(outs), **options)


@functools.cache
def _triton_scale() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def scale(x_ptr, out_ptr, alpha, N: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        m = offs < N
        tl.store(out_ptr + offs, alpha * tl.load(x_ptr + offs, mask=m), mask=m)

    return scale


_CPP = """
void scale(const pk::Tensor& x, pk::Tensor& out, float alpha) {
  const float* a = x.data_ptr<float>(); float* b = out.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = alpha * a[i];
}
"""


class _PerCall:
    """A native function with its ``outs`` bound (they are a keyword of its calls);
    its attributes are the function's."""

    def __init__(self, function: Any, outs: Any) -> None:
        self.function, self.outs = function, outs

    def __call__(self, *args: Any, **keywords: Any) -> Any:
        return self.function(*args, outs=self.outs, **keywords)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.function, name)


def _cuda_raw(outs: Any, **options: Any) -> Any:
    # The loaders default to the reference's "sequential"; the table asks for the
    # default of every wrapper (vmap_method=None), as the other lines do.
    options.setdefault("vmap_method", None)
    return _PerCall(_cpp_module().scale.variant(**options), outs)


@functools.cache
def _cpp_module() -> Any:
    return pk.load_cpp_inline("conformance_scale", _CPP, ["scale"])


_C = """
#include <stdint.h>
void scale(const float* x, float* out, int64_t n, float alpha) {
  for (int64_t i = 0; i < n; ++i) out[i] = alpha * x[i];
}
"""


def _ctypes(outs: Any, **options: Any) -> Any:
    import ctypes_backend as cb

    return cb.ctypes_kernel(_c_function(), outs, {"alpha": "float32"}, **options)


@functools.cache
def _c_function() -> Any:
    import ctypes_backend as cb

    pk.register_backend(cb.BACKEND, replace=True)
    return cb.compile_c(_C, "scale")


def _jax_raw(outs: Any, **options: Any) -> Any:
    from polykernel.backends.jax_raw import jax_raw_kernel

    seen = SUBJECTS_BY_NAME["jax_raw"].seen

    def scale(x, alpha):
        seen.append(alpha)
        return gain(alpha) * x

    return jax_raw_kernel(scale, outs, **options)


# -- the table's columns: one line per backend -------------------------------------
SUBJECTS = [
    Subject("numba", _numba, "numba", "int4", needs=("numba",)),
    Subject("numba_cuda", _numba_cuda, "numba_cuda", "bfloat16", ("launch_dims", 3),
            host_callback=True, needs=("numba.cuda",)),
    Subject("warp", _warp, "float32", "bfloat16", ("launch_dims", 4), needs=("warp",)),
    Subject("pallas", _pallas, "static", None, ("grid", 6)),
    Subject("triton", _triton, "triton", "complex64", ("grid", 3),
            host_callback=True, needs=("triton",)),
    Subject("cuda_raw", _cuda_raw, "float32", "int4", needs=("g++",)),
    Subject("jax_raw", _jax_raw, "static", None),
    Subject("ctypes_c", _ctypes, "float32", "float64", host_callback=True,
            needs=("gcc",)),
]  # fmt: skip
SUBJECTS_BY_NAME = {s.name: s for s in SUBJECTS}
LAUNCHED = [s for s in SUBJECTS if s.launch is not None]

# A launch parameter's bad values, the message pattern (``{name}``: the
# parameter; ``{value}``: the value as shown) and the value as shown.
_TYPE = r"{name} must be (an int or )?a tuple of .* ints(, or .*)?, got {value} "
LAUNCH_VALUES = [
    ("string", "16", _TYPE, "'16'"),
    ("bool", True, _TYPE, "True"),
    ("float", 1.5, _TYPE, "1.5"),
    ("float-integral", 4.0, _TYPE, "4.0"),
    ("string-in-tuple", (1, "2"), _TYPE, r"\(1, '2'\)"),
    ("none-in-tuple", (1, None), _TYPE, r"\(1, None\)"),
    ("negative", -1, r"every entry of {name} must be in \[", "-1"),
    ("too-large", 2**31, r"every entry of {name} must be in \[", str(2**31)),
]


def primitive(subject: Subject) -> Any:
    """An ``XLACustomKernel`` whose only ``cpu`` kernel is the subject's, with the
    rules of a linear, self-adjoint ``alpha * x`` (for ``jvp`` and ``grad``)."""
    return _primitive(subject)


@functools.cache
def _primitive(subject: Subject) -> Any:
    op = pk.XLACustomKernel(f"conformance.{subject.name}")

    def generator(outs: Any, alpha: Any, **kw: Any) -> Any:
        return lambda x: [subject.kernel(outs[0])(x, alpha=alpha)]

    op.def_kernel(subject.name, "cpu", generator)
    op.def_jvp_rule2(lambda t, x, **kw: op(t, outs=kw["outs"], alpha=kw["alpha"]))
    op.def_transpose_rule(
        lambda ct, x, *, outs, alpha, **kw: [op(ct[0], outs=outs, alpha=alpha)[0]]
    )
    return op
