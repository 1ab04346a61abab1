"""The C layouts polykernel writes for Warp match Warp's own (ctypes mirrors and
the parameter list of its compiled CUDA entry point, see test_warp_gpu.py)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from polykernel.backends.warp.plan import (
    ARRAY_NDIM,
    ARRAY_SHAPE,
    ARRAY_STRIDES,
    ARRAY_T_SIZE,
    array_bytes,
    bounds_bytes,
    bounds_layout,
    describe_kernel,
    fold_launch,
)

wp = pytest.importorskip("warp")
from warp._src.types import array_t, launch_bounds_t  # noqa: E402


def test_array_t_offsets_match_warp():
    assert ctypes.sizeof(array_t) == ARRAY_T_SIZE
    assert array_t.shape.offset == ARRAY_SHAPE
    assert array_t.strides.offset == ARRAY_STRIDES
    assert array_t.ndim.offset == ARRAY_NDIM


@pytest.mark.parametrize("shape", [(7,), (3, 5), (2, 3, 4), (2, 1, 3, 2), ()])
def test_array_bytes_equal_warps_array_t(shape):
    full = shape or (1,)
    strides = [4 * int(np.prod(full[k + 1 :])) for k in range(len(full))]
    ref = array_t(0x1234, 0, len(full), full, strides)
    assert array_bytes(shape, 4, 0x1234) == bytes(ref)


@pytest.mark.parametrize("ndim", [1, 2, 3, 4])
def test_launch_bounds_layout_and_bytes_match_warp(ndim):
    dims = (3, 4, 5, 6)[:ndim]
    ref = launch_bounds_t(dims)
    size_at, mult_at, total = bounds_layout(ndim)
    assert (type(ref).size.offset, type(ref).coord_mult.offset) == (size_at, mult_at)
    assert ctypes.sizeof(ref) == total
    assert bounds_bytes(dims, ndim) == bytes(ref)


def test_launch_dims_fold_like_warp():
    assert fold_launch((4,), 2) == ((4, 1), 4, 1)
    assert fold_launch((2, 3, 5), 1) == ((2,), 30, 15)  # extras -> coord_mult


@wp.kernel(module="unique")
def _mixed(a: wp.array(dtype=wp.int8), flag: wp.bool,
           b: wp.array2d(dtype=wp.float64), scale: wp.float32, n: wp.int64,
           out: wp.array(dtype=wp.float16)):  # fmt: skip
    pass


def test_args_struct_offsets_match_a_c_struct_of_warps_types():
    plan = describe_kernel(_mixed)
    fields = [(a.label, array_t if a.kind == "array" else
               getattr(wp, a.dtype)._type_) for a in plan.args]  # fmt: skip
    ref = type("Args", (ctypes.Structure,), {"_fields_": fields})
    assert [a.offset for a in plan.args] == [getattr(ref, n).offset for n, _ in fields]
    assert plan.struct_size == ctypes.sizeof(ref)
    assert [a.kind for a in plan.args] == ["array", "scalar", "array", "scalar",
                                           "scalar", "array"]  # fmt: skip
    assert [a.ndim for a in plan.arrays] == [1, 2, 1]
