"""Triton's signature and launch-parameter packing (pure: no Triton, no GPU)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from polykernel.backends.triton.params import (
    build_signature,
    launch_params,
    pointer_type,
    scalar_type,
)
from polykernel.errors import KernelRegistrationError, KernelTypeError
from polykernel.launcher import BufferSpec, LaunchSpec

ARGS = ["x", "y", "out", "n", "alpha", "flag", "BLOCK"]


def _sig(**scalars):
    values = {"n": 10, "alpha": 2.0, "flag": True, **scalars}
    return build_signature(
        "axpy", ARGS, {"BLOCK"}, ["float32", "float32", "float32"], values,
        {"BLOCK": 128},
    )  # fmt: skip


def test_signature_types_pointers_scalars_and_constexprs():
    sig = _sig()
    assert sig.signature == {
        "x": "*fp32", "y": "*fp32", "out": "*fp32", "n": "i32", "alpha": "fp32",
        "flag": "i1", "BLOCK": "constexpr",
    }  # fmt: skip
    assert sig.constexprs == {"BLOCK": 128}
    assert [name for name, _, _ in sig.scalars] == ["n", "alpha", "flag"]
    assert sig.attrs == {(i,): [["tt.divisibility", 16]] for i in range(3)}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, "i1"), (7, "i32"), (-(2**31), "i32"), (2**31, "i64"), (2**63, "u64"),
        (1.5, "fp32"), (np.float64(1.5), "fp64"), (np.int64(3), "i64"),
        (np.float16(1), "fp16"), (np.uint8(1), "u8"),
    ],
)  # fmt: skip
def test_scalar_types_follow_tritons_launcher(value, expected):
    assert scalar_type("k", "a", value) == expected


def test_a_non_scalar_argument_is_a_type_error():
    with pytest.raises(KernelTypeError, match="scalar argument 'a' must be a bool"):
        scalar_type("k", "a", "text")
    with pytest.raises(TypeError):
        scalar_type("k", "a", [1, 2])


def test_pointer_types_and_an_unsupported_dtype():
    assert pointer_type("int64") == "*i64" and pointer_type("bfloat16") == "*bf16"
    with pytest.raises(KernelRegistrationError, match="dtype complex64 are not"):
        pointer_type("complex64")


def test_launch_params_drop_constexprs_and_append_the_two_scratch_pointers():
    sig = _sig()
    params = launch_params(sig, n_buffers=3)
    spec = LaunchSpec(
        n_in=2,
        buffers=(BufferSpec("float32", (10,)),) * 3,
        params=params,
        grid=(1, 1, 1),
        block=(128, 1, 1),
    )
    blob = spec.pack([0x1000, 0x2000, 0x3000])
    # 3 pointers, i32 n, fp32 alpha, i1 flag as one byte, then two null pointers
    # (8-byte aligned: 7 bytes of padding after the flag).
    assert struct.unpack("<QQQifB7xQQ", blob) == (
        0x1000, 0x2000, 0x3000, 10, 2.0, 1, 0, 0,
    )  # fmt: skip
    assert [p.align for p in params[:3]] == [16, 16, 16]


def test_global_scratch_points_at_an_extra_buffer():
    sig = _sig()
    params = launch_params(sig, n_buffers=4, global_scratch=3)
    assert params[-2].buffer == 3 and params[-1].value == bytes(8)
    with pytest.raises(ValueError, match="not an extra buffer"):
        launch_params(sig, n_buffers=4, global_scratch=1)


def test_a_call_keyword_wins_and_a_plain_parameter_may_be_fixed_up_front():
    sig = build_signature("k", ["x", "n", "B"], {"B"}, ["float32"], {"B": 8},
                          {"B": 4, "n": 3})  # fmt: skip
    assert sig.constexprs == {"B": 8} and sig.scalars == (("n", "i32", 3),)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scalars": {}}, "scalar parameter 'n' has no value; pass n=... as a keyword"),
        ({"scalars": {"n": 1}, "constexprs": {}}, "tl.constexpr parameter 'B' has no "
         r"value; pass B=\.\.\. to triton_kernel"),
        ({"scalars": {"n": 1, "m": 2}}, r"keyword\(s\) \['m'\] name no scalar or "
         r"constexpr parameter; after the 1 buffers the kernel takes \(n, B\)"),
        ({"dtypes": ["float32"] * 3}, "first 3 parameters must be pointers"),
    ],
)  # fmt: skip
def test_signature_errors_say_what_to_pass(kwargs, message):
    args = {"scalars": {"n": 1}, "constexprs": {"B": 4}, "dtypes": ["float32"]}
    args.update(kwargs)
    with pytest.raises(KernelRegistrationError, match=message):
        build_signature("k", ["x", "n", "B"], {"B"}, args["dtypes"], args["scalars"],
                        args["constexprs"])  # fmt: skip
