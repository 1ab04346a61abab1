"""arg_spec parsing and signature inference (no compiler needed)."""

from __future__ import annotations

import pytest

from polykernel.backends.cuda_raw.argspec import check_module_name, resolve_specs
from polykernel.backends.cuda_raw.codegen import render_source
from polykernel.errors import KernelRegistrationError, KernelTypeError

SRC = """
// a comment mentioning void ghost(int x)
void add(const pk::Tensor& a, pk::Tensor const &b, pk::Tensor& out,
         float alpha, const int64_t n, unsigned int u, bool flag) {}
void launch(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream, double s) {}
void bad(float* x, pk::Tensor& y) {}
void noret(const pk::Tensor& x) {}
"""


def test_infers_tokens_from_signature():
    (spec,) = resolve_specs("m", SRC, ["add"], "cpu")
    assert spec.tokens() == [
        "arg",
        "arg",
        "ret",
        "attr.alpha:float32",
        "attr.n:int64",
        "attr.u:uint32",
        "attr.flag:bool",
    ]
    assert [p.name for p in spec.args] == ["a", "b"]


def test_infers_stream_for_cuda_only():
    (spec,) = resolve_specs("m", SRC, "launch", "cuda")
    assert spec.tokens() == ["arg", "ret", "stream", "attr.s:float64"]
    assert spec.has_stream
    with pytest.raises(KernelRegistrationError, match="only valid for CUDA"):
        resolve_specs("m", SRC, ["launch"], "cpu")


def test_explicit_tokens_with_pins_and_untyped_attr():
    specs = resolve_specs(
        "m",
        SRC,
        {
            "add": [
                "arg:float32[1]",
                "arg[0]",
                "ret:int32",
                "attr.alpha",
                "attr.n",
                "attr.u:uint32",
                "attr.flag:bool",
            ]
        },
        "cpu",
    )
    tokens = specs[0].tokens()
    assert tokens[:5] == [
        "arg:float32[1]",
        "arg[0]",
        "ret:int32",
        "attr.alpha:float32",
        "attr.n:int64",
    ]


@pytest.mark.parametrize(
    ("functions", "match"),
    [
        ({"f": ["arg", "out"]}, "unknown token 'out'"),
        ({"f": ["arg:float33", "ret"]}, "unknown dtype 'float33'"),
        ({"f": ["arg", "ret", "attr.x"]}, "has no type and none can be read"),
        ({"f": ["arg", "ret", "attr.x:complex64"]}, "unsupported type 'complex64'"),
        ({"f": ["arg", "ret", "attr.1x:int32"]}, "is not a C identifier"),
        ({"f": ["arg", "ret", "attr.outs:int32"]}, "reserved or repeated"),
        ({"f": ["arg", "ret", "attr.a:int32", "attr.a:int32"]}, "reserved or repeated"),
        ({"f": ["arg"]}, "has no output"),
        ({"f": ["arg", "ret", "stream", "stream"]}, "more than one 'stream'"),
        ({"add": ["arg", "ret"]}, "the spec has 2 tokens"),
        (["ghost"], "no 'void ghost\\(...\\)' definition found"),
        (["bad"], "cannot infer a token for parameter 'float\\* x'"),
        (["noret"], "has no output"),
        (['x; system("rm")'], "is not a C identifier"),
        ([], "`functions` is empty"),
    ],
)
def test_spec_errors(functions, match):
    platform = "cuda" if "stream" in str(functions) else "cpu"
    with pytest.raises(KernelRegistrationError, match=match):
        resolve_specs("m", SRC, functions, platform)


def test_non_string_token_is_a_type_error():
    with pytest.raises(KernelTypeError, match="token 3 is not a string"):
        resolve_specs("m", SRC, {"f": ["arg", 3]}, "cpu")


@pytest.mark.parametrize("name", ["", "1abc", "a-b", "a..b", "a b"])
def test_module_name_guard(name):
    with pytest.raises(KernelRegistrationError, match=r"module name .* is not valid"):
        check_module_name(name)


@pytest.mark.parametrize("name", [None, 3, b"abc"])
def test_module_name_of_wrong_type_is_a_type_error(name):
    with pytest.raises(KernelTypeError, match=r"module name .* is not valid"):
        check_module_name(name)


def test_reference_token_aliases_are_accepted():
    src = "void f(const pk::Tensor& x, pk::Tensor& y, float a) {}"
    spec = resolve_specs("m", src, {"f": ["args", "rets", "attrs.a"]}, "cpu")[0]
    assert spec.tokens() == ["arg", "ret", "attr.a:float32"]


def test_wrapper_checks_pinned_dtype_and_rank():
    specs = resolve_specs(
        "m",
        SRC,
        {
            "add": [
                "arg:float32[2]",
                "arg",
                "ret",
                "attr.alpha",
                "attr.n",
                "attr.u",
                "attr.flag",
            ]
        },
        "cpu",
    )
    full, wrappers = render_source("m", SRC, specs, "cpu")
    # input 0 pins dtype code 11 (float32) and rank 2; input 1 pins nothing (-1).
    assert "get_buffer(frame, false, 0, 11, 2, " in wrappers
    assert "get_buffer(frame, false, 1, -1, -1, " in wrappers
    assert full.startswith('#include "polykernel.h"\n#line 1 "m.cpp"')
    # attributes are decoded by name, in XLA's (sorted) order, with their type code
    assert "float attr_alpha;" in wrappers
    assert 'get_scalar(frame, 0, "alpha", 5, 11, ' in wrappers
    assert "::add(" in wrappers and "ffi.h" not in full
