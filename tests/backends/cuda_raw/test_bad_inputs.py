"""Bad inputs to the native loaders: each is a clear error raised before compiling.

A wrong type is a ``TypeError`` and a wrong value a ``ValueError`` (each also a
polykernel error) naming the argument, what was expected and what came; the
process stays usable for the next valid call.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from polykernel import (
    CompiledModule,
    CompileOptions,
    CPPBackend,
    load_cpp_file,
    load_cpp_inline,
    load_cuda_dir,
    load_cuda_inline,
    normalize_tokens,
)
from polykernel.errors import (
    KernelError,
    KernelRegistrationError,
    KernelSourceNotFoundError,
    KernelTypeError,
    UnsupportedArchError,
)

OK = "void copy(const pk::Tensor& x, pk::Tensor& y) {}\n"


@pytest.mark.parametrize("method", ["vectorized", "Sequential", ""])
def test_bogus_vmap_method_lists_the_valid_ones(method):
    with pytest.raises(ValueError, match=r"vmap_method=.* is not valid") as info:
        load_cpp_inline("bad_vmap", OK, ["copy"], vmap_method=method)
    assert isinstance(info.value, KernelRegistrationError)
    for valid in ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all"):
        assert f"'{valid}'" in str(info.value)
    with pytest.raises(ValueError, match="vmap_method"):
        load_cuda_inline("bad_vmap_cuda", OK, ["copy"], vmap_method=method)


def test_vmap_method_of_the_wrong_type_is_a_type_error():
    with pytest.raises(
        TypeError, match=r"vmap_method must be a string, one of .*\(got int 3\)"
    ):
        load_cpp_inline("bad_vmap_type", OK, ["copy"], vmap_method=3)


@pytest.mark.parametrize(
    ("source", "spec", "match"),
    [
        (
            "void f(const pk::Tensor& x, const pk::Tensor& y) {}",
            ["arg", "ret"],
            r"function 'f': parameter 1 'y' is declared 'const pk::Tensor& y' but "
            r"its token is 'ret'; expected 'arg'",
        ),
        (
            "void f(const BE::Tensor x, const BE::Tensor out) {}",
            ["arg", "ret"],
            r"parameter 1 'out' is declared 'const BE::Tensor out' but its token is "
            r"'ret'; expected 'arg'",
        ),
        (
            "void f(pk::Tensor& x, pk::Tensor& y) {}",
            ["arg", "ret"],
            r"parameter 0 'x' is declared 'pk::Tensor& x' but its token is 'arg'; "
            r"expected 'ret'",
        ),
        (
            "void f(const pk::Tensor& x, pk::Tensor& y, float a) {}",
            ["arg", "ret", "ret"],
            r"parameter 2 'a' .* token is 'ret'; expected 'attr.a' \(the parameter is "
            r"not a tensor\)",
        ),
        (
            "void f(const pk::Tensor& x, pk::Tensor& y) {}",
            ["arg", "attr.y:float32"],
            r"parameter 1 'y' .* expected 'arg' or 'ret' \(the parameter is a tensor\)",
        ),
    ],
)
def test_spec_contradicting_the_signature_constness(source, spec, match):
    with pytest.raises(ValueError, match=match) as info:
        load_cpp_inline("bad_const", source, {"f": spec})
    assert isinstance(info.value, KernelRegistrationError)


def test_spec_agreeing_with_by_value_tensors_is_accepted():
    # The reference's own spelling: a non-const BE::Tensor passed by value may be
    # an input (the wrapper hands it a copy of the view).
    src = "void f(BE::Tensor x, BE::Tensor y) { y.data_ptr<float>()[0] = 7; }"
    mod = load_cpp_inline("bad_byvalue_ok", src, {"f": ["arg", "ret"]})
    out = mod.f(jnp.zeros(1, jnp.float32), outs=jax.ShapeDtypeStruct((1,), "float32"))
    assert out.tolist() == [7.0]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: load_cpp_inline("m", None, ["f"]), r"cpp_sources must be .* NoneType"),
        (lambda: load_cpp_inline("m", [OK, 3], ["f"]), r"cpp_sources must be .* list"),
        (lambda: load_cuda_inline("m", 42, ["f"]), r"cuda_sources must be .* int 42"),
        (lambda: load_cpp_inline(None, OK, ["copy"]), "module name None is not valid"),
        (lambda: load_cpp_inline("m", OK, 42), r"`functions` must be a dict .* int"),
        (lambda: load_cpp_inline("m", OK, {"copy": 5}), "spec must be a list of tok"),
        (lambda: load_cpp_inline("m", OK, {"copy": ["arg", 5]}), "token 5 is not a st"),
        (
            lambda: load_cpp_inline("m", OK, ["copy"], options={"optimization": 2}),
            r"options must be a CompileOptions \(got dict\)",
        ),
        (
            lambda: load_cpp_inline("m", OK, ["copy"], extra_cflags=5),
            r"extra_cflags must be a string or a list of strings.*\(got int 5\)",
        ),
        (
            lambda: load_cuda_inline("m", OK, ["copy"], compute_capability=86),
            r"compute_capability must be a string .*\(got int 86\)",
        ),
        (
            lambda: load_cuda_inline("m", OK, ["copy"], optimization_level="2"),
            r"optimization_level must be an int 0-3 \(got str '2'\)",
        ),
        (
            lambda: load_cuda_inline("m", OK, ["copy"], use_fast_math="yes"),
            r"use_fast_math must be True or False \(got str 'yes'\)",
        ),
        (
            lambda: load_cpp_inline("m", OK, ["copy"], verbose=1),
            r"verbose must be True or False \(got int 1\)",
        ),
        (
            lambda: load_cpp_inline("m", OK, ["copy"], target_prefix=3),
            r"target_prefix must be a string or None \(got int 3\)",
        ),
        (
            lambda: load_cpp_inline("m", OK, ["copy"], build_directory=3),
            r"build_directory must be a string or None \(got int 3\)",
        ),
        (lambda: load_cpp_file(123), r"filepath must be a path .* got int 123"),
        (lambda: load_cpp_inline("m", OK, ["copy"], bogus=1), "unexpected keyword"),
        (
            lambda: load_cpp_file(__file__, ["copy"], bogus=1),
            r"load_cpp_file\(\) got an unexpected keyword argument 'bogus'",
        ),
        (lambda: CompileOptions(fast_math="yes"), r"fast_math='yes'\) is not valid"),
        (lambda: CompileOptions(extra_cflags=5), r"extra_cflags=5\) is not valid"),
        (lambda: CompileOptions(compiler=3), r"compiler=3\) is not valid; expected"),
        (lambda: CompileOptions(timeout="1"), r"timeout='1'\) is not valid"),
    ],
)
def test_wrong_types_are_type_errors_naming_the_argument(call, match):
    with pytest.raises(TypeError, match=match) as info:
        call()
    if "unexpected keyword" not in match or "load_cpp_file" in match:
        assert isinstance(info.value, KernelError)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: CompileOptions(optimization=7),
            r"CompileOptions\(optimization=7\) is not valid; expected 0, 1, 2, 3",
        ),
        (lambda: CompileOptions(timeout=-1), r"timeout=-1\) is not valid; expected a"),
        (lambda: CompileOptions(cuda_arch=["sm_x"]), "architecture 'sm_x' is not"),
        (
            lambda: load_cuda_inline("m", OK, ["copy"], optimization_level=7),
            r"optimization_level=7 is out of range; expected 0, 1, 2 or 3",
        ),
        (
            lambda: load_cuda_inline("m", OK, ["copy"], compute_capability="sm_x"),
            "architecture 'sm_x' is not understood",
        ),
        (
            lambda: load_cpp_inline("m", "void f(const BE::Tensor x) {}"),
            r"`functions` was not given and no '// @pk <name>' \(or '// @BE <name>'\)",
        ),
        (
            lambda: load_cpp_inline("m", "// @BE f\n// @pk f\nvoid f();"),
            "function 'f' is marked twice",
        ),
    ],
)
def test_bad_values_are_value_errors(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert isinstance(info.value, KernelRegistrationError | UnsupportedArchError)


def test_a_setting_given_both_ways_is_a_type_error_naming_both():
    with pytest.raises(
        TypeError,
        match=r"'optimization' is given twice, as optimization_level=1 and as "
        r"options=CompileOptions\(optimization=2\)",
    ):
        load_cuda_inline(
            "both",
            OK,
            ["copy"],
            optimization_level=1,
            options=CompileOptions(optimization=2),
        )
    with pytest.raises(TypeError, match=r"extra_cflags=\['-DA'\] and as options="):
        load_cpp_inline(
            "both",
            OK,
            ["copy"],
            extra_cflags=["-DA"],
            options=CompileOptions(extra_cflags=["-DB"]),
        )


def test_one_setting_each_way_is_merged():
    # Different settings through the two routes combine; nothing is ambiguous.
    src = "void f(const pk::Tensor& x, pk::Tensor& y) { y.data_ptr<float>()[0] = K; }"
    mod = load_cpp_inline(
        "merged",
        src,
        ["f"],
        extra_cflags=["-DK=4"],
        options=CompileOptions(optimization=1),
    )
    out = mod.f(jnp.zeros(1, jnp.float32), outs=jax.ShapeDtypeStruct((1,), "float32"))
    assert out.tolist() == [4.0]


def test_missing_sources_are_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot read source file") as info:
        load_cpp_file(tmp_path / "absent.cpp")
    assert isinstance(info.value, KernelSourceNotFoundError)
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        load_cuda_dir(tmp_path / "absent")


def test_the_process_is_usable_after_bad_inputs():
    for bad in (
        lambda: load_cpp_inline("after", None, ["copy"]),
        lambda: load_cpp_inline("after", OK, ["copy"], vmap_method="nope"),
        lambda: load_cpp_inline("after", OK, {"copy": ["ret", "ret"]}),
    ):
        with pytest.raises((TypeError, ValueError)):
            bad()
    src = "void one(const pk::Tensor& x, pk::Tensor& y) { y.data_ptr<float>()[0] = 1; }"
    mod = load_cpp_inline("after", src, ["one"])
    out = mod.one(jnp.zeros(1, jnp.float32), outs=jax.ShapeDtypeStruct((1,), "float32"))
    assert out.tolist() == [1.0]
    assert isinstance(KernelTypeError("x"), TypeError)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: CompiledModule(None, ["f"]), r"so_path must be .* got NoneType"),
        (lambda: CompiledModule("x.so", 5), r"function_names must be .* got int 5"),
        (
            lambda: CPPBackend().compile_source(None, "x.so", "b"),
            r"CPPBackend.compile_source: source must be the source text \(str\)",
        ),
        (
            lambda: CPPBackend().compile_source("int x;", None, "b"),
            r"output_path must be a path .* got NoneType None",
        ),
        (
            lambda: CPPBackend().compile_source("int x;", "x.so", "b", extra_cflags=5),
            r"extra_cflags must be a list of strings or None, got int 5",
        ),
        (lambda: normalize_tokens(5), r"tokens must be a list of arg_spec tokens"),
        (lambda: load_cuda_dir(None), r"directory must be a path .* got NoneType"),
    ],
)
def test_wrong_types_deeper_in_the_native_api(call, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written, but if it were: not here
    with pytest.raises(TypeError, match=match) as info:
        call()
    assert isinstance(info.value, KernelTypeError)
    assert list(tmp_path.iterdir()) == []
