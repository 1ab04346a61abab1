"""Pure launch arithmetic of the Numba-CUDA backend: grid/block and the array ABI."""

from __future__ import annotations

import struct

import pytest

from polykernel.backends.numba_cuda.array_abi import (
    array_params,
    c_strides,
    kernel_launch_spec,
    params_per_array,
)
from polykernel.backends.numba_cuda.launch_config import resolve_launch
from polykernel.errors import KernelRegistrationError
from polykernel.launcher.layout import BufferSpec


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"grid": 4, "block": 256}, ((4, 1, 1), (256, 1, 1))),
        ({"grid": (2, 3), "block": (16, 8)}, ((2, 3, 1), (16, 8, 1))),
        ({"launch_dims": 1024}, ((4, 1, 1), (256, 1, 1))),
        ({"launch_dims": 1000, "threads_per_block": 128}, ((8, 1, 1), (128, 1, 1))),
        ({"launch_dims": (10, 3), "threads_per_block": 4}, ((3, 3, 1), (4, 1, 1))),
        ({"launch_dims": 0}, ((0, 1, 1), (256, 1, 1))),
    ],
)
def test_launch_configuration(kwargs, expected):
    assert resolve_launch(**kwargs) == expected


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, r"no launch configuration \(none given\); give grid and block together"),
        ({"grid": 4}, r"\(block is missing\); give grid and block together"),
        ({"block": 4}, r"\(grid is missing\)"),
        ({"grid": 1, "block": 1, "launch_dims": 8}, "launch_dims cannot be combined"),
        ({"grid": 1.5, "block": 1}, "grid must be an int or a tuple of 1 to 3 ints"),
        ({"grid": 1, "block": 0}, r"every entry of block must be in \[1, 1024\]"),
        ({"grid": (1, 1, 1, 1), "block": 1}, "tuple of 1 to 3 ints"),
        ({"launch_dims": 8, "threads_per_block": 0}, r"threads_per_block must be "
         r"an int in \[1, 1024\]"),
    ],
)  # fmt: skip
def test_bad_launch_configurations_name_the_rule(kwargs, message):
    with pytest.raises(KernelRegistrationError, match=message) as info:
        resolve_launch(**kwargs)
    assert isinstance(info.value, ValueError)


def test_c_strides_are_bytes_in_row_major_order():
    assert c_strides((2, 3, 4), 8) == (96, 32, 8)
    assert c_strides((), 4) == ()
    assert c_strides((0, 5), 4) == (20, 4)


def test_array_params_follow_numbas_kernel_argument_order():
    params = array_params(2, (3, 5), 4)
    assert len(params) == params_per_array(2) == 9
    values = [
        None if p.value is None else struct.unpack("<q", p.value)[0] for p in params
    ]
    # meminfo, parent, nitems, itemsize, data, shape..., strides...
    assert values == [0, 0, 15, 4, None, 3, 5, 20, 4]
    assert params[4].buffer == 2 and all(p.size == 8 for p in params)


def test_a_launch_spec_packs_one_array_block_per_buffer():
    bufs = [BufferSpec("float32", (8,)), BufferSpec("float64", (2, 2)),
            BufferSpec("int32", ())]  # fmt: skip
    spec = kernel_launch_spec(bufs, 2, (1, 1, 1), (8, 1, 1), shared_mem=64)
    assert len(spec.params) == 7 + 9 + 5 and spec.shared_mem == 64
    blob = spec.pack([0x1000, 0x2000, 0x3000])
    words = struct.unpack(f"<{len(blob) // 8}q", blob)
    assert words[:7] == (0, 0, 8, 4, 0x1000, 8, 4)
    assert words[7:16] == (0, 0, 4, 8, 0x2000, 2, 2, 16, 8)
    assert words[16:] == (0, 0, 1, 4, 0x3000)


def test_scalars_follow_the_arrays_by_value_at_their_own_width():
    import numpy as np

    f32 = BufferSpec("float32", (4,))
    values = [np.float64(2.5), np.int64(-3), np.bool_(True), np.float16(1)]
    spec = kernel_launch_spec([f32, f32], 1, (1, 1, 1), (4, 1, 1), scalars=values)
    tail = spec.params[2 * params_per_array(1) :]
    assert [p.size for p in tail] == [8, 8, 1, 2]  # NVVM: .f64, .u64, .u8, .u16
    assert tail[0].value == struct.pack("<d", 2.5)
    assert tail[1].value == struct.pack("<q", -3)
    assert tail[2].value == b"\x01" and tail[3].value == np.float16(1).tobytes()
