"""The GPU launcher's pure parts: parameter layout, packing, spec bytes, vmap plan."""

from __future__ import annotations

import struct

import pytest

from polykernel.launcher.batching import plan_batch
from polykernel.launcher.layout import (
    ABI_VERSION,
    BufferSpec,
    LaunchSpec,
    Param,
    constant,
    pointer,
)

F32_8 = BufferSpec("float32", (8,))


def _spec(params, buffers=(F32_8, F32_8), n_in=1, **kw):
    return LaunchSpec(n_in, tuple(buffers), tuple(params), (2, 1, 1), (4, 1, 1), **kw)


def test_parameters_are_naturally_aligned_in_the_template():
    spec = _spec([constant(1, "int8"), pointer(0), constant(2, "int16"),
                  constant(3, "float32"), constant(4, "int8"), pointer(1)])  # fmt: skip
    assert spec.offsets() == (0, 8, 16, 20, 24, 32)
    assert spec.template_size() == 40


def test_constants_are_little_endian_bytes_of_their_dtype():
    assert constant(258, "int32").value == b"\x02\x01\x00\x00"
    assert constant(-1, "int64").value == b"\xff" * 8
    assert constant(1.5, "float64").value == struct.pack("<d", 1.5)
    assert constant(True, "bool").value == b"\x01"


def test_pack_patches_pointers_into_the_template():
    spec = _spec([pointer(0), constant(7, "int32"), pointer(1)])
    blob = spec.pack([0x1000, 0x2000])
    assert struct.unpack("<QiiQ", blob) == (0x1000, 7, 0, 0x2000)
    assert spec.template() == struct.pack("<QiiQ", 0, 7, 0, 0)


def test_pack_refuses_unaligned_pointers_the_kernel_assumes_aligned():
    spec = _spec([pointer(0, align=16), pointer(1)])
    with pytest.raises(ValueError, match="buffer 0 at 0x1004 is not 16-byte aligned"):
        spec.pack([0x1004, 0x2000])


def test_encode_writes_the_documented_words():
    spec = _spec(
        [pointer(0, align=16), constant(5, "int32"), pointer(1)], shared_mem=64
    )
    blob = spec.encode()
    words = struct.unpack(f"<{len(blob) // 8}q", blob)
    head = [0x314C4B50, ABI_VERSION, 1, 1, 11, 4, 1, 8, 11, 4, 1, 8, 2, 1, 1, 4, 1, 1]
    assert list(words[:18]) == head
    assert words[18:21] == (64, 3, 24)  # shared_mem, parameter count, template bytes
    assert words[21:27] == (0, 8, 8, 4, 16, 8)  # (offset, size) per parameter
    assert blob[27 * 8 : 30 * 8] == spec.template()
    assert words[30:] == (2, 0, 0, 16, 2, 1, 0)  # patches: (param, buffer, align)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Param(3, value=b"abc"), "size must be one of"),
        (lambda: Param(8), "either a constant or a buffer pointer"),
        (lambda: Param(4, buffer=0), "a pointer parameter has 8 bytes"),
        (lambda: Param(4, value=b"ab"), "constant of 2 bytes for a 4-byte parameter"),
        (lambda: _spec([pointer(2)]), "pointer to buffer 2, but there are 2"),
        (lambda: _spec([], buffers=(F32_8,)), "need at least one output"),
        (lambda: _spec([constant(0, "int64")] * 4097), "more than the 32768"),
    ],
)
def test_invalid_layouts_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_batch_plan_without_vmap_is_one_launch():
    plan = plan_batch([(3,), (2, 3)], 1, [(3,), (2, 3)])
    assert plan.batch_shape == () and plan.launches == 1
    assert list(plan.elements()) == [()]


def test_batch_plan_broadcasts_size_one_and_unbatched_inputs():
    plan = plan_batch([(3,), (3,), (3,)], 2, [(1, 3), (3,), (4, 3)])
    assert plan.batch_shape == (4,) and plan.extra == (1, 0, 1)
    assert [plan.index(e, 0) for e in range(4)] == [(0,)] * 4
    assert [plan.index(e, 2) for e in range(4)] == [(0,), (1,), (2,), (3,)]
    assert plan.index(3, 1) == ()


def test_nested_vmap_runs_every_element_row_major():
    plan = plan_batch([(3,), (3,)], 1, [(2, 1, 3), (2, 2, 3)])
    assert plan.launches == 4
    assert list(plan.elements()) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert plan.index((1, 1), 0) == (1, 0)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ([(3,), (4,)], r"output 0 has shape \(4\); the kernel was compiled for \(3\)"),
        ([(2, 3), (4, 3)], r"input 0 has shape \(2, 3\); .* with 1 leading vmap axes"),
        ([(3,), (4, 3), (5, 3)], r"output 1 has shape \(5, 3\)"),
        ([(3,), (1, 3), (1, 3)], None),
        ([(3,), (3,), (1, 3)], r"output 1 has shape \(1, 3\)"),
    ],
)
def test_batch_plan_errors_name_the_buffer(shapes, message):
    compiled = [(3,)] * len(shapes)
    if message is None:
        assert plan_batch(compiled, 1, shapes).launches == 1
        return
    with pytest.raises(ValueError, match=message):
        plan_batch(compiled, 1, shapes)


def test_output_rank_below_the_compiled_rank_is_refused():
    with pytest.raises(ValueError, match="output 0 has rank 1, expected 2"):
        plan_batch([(3,), (2, 3)], 1, [(3,), (3,)])
