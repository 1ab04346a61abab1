"""C++ CPU modules end to end: compile, register, call under jit/vmap, errors."""

from __future__ import annotations

import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel import CompileOptions, load_cpp_file, load_cpp_inline
from polykernel.errors import CompilationError, KernelCallError

SRC = r"""
#include <stdexcept>
#include <string>

// Inferred spec: arg, arg, ret, attr.alpha:float32
void scale_add(const pk::Tensor& x, const pk::Tensor& y, pk::Tensor& out,
               float alpha) {
  const float* a = x.data_ptr<float>();
  const float* b = y.data_ptr<float>();
  float* o = out.data_ptr<float>();
  for (int64_t i = 0; i < out.numel(); ++i) o[i] = alpha * a[i] + b[i];
}

// Two outputs: a 0-d sum and the row count; any rank.
void sum_and_rows(const pk::Tensor& x, pk::Tensor& total, pk::Tensor& rows) {
  const float* a = x.data_ptr<float>();
  double s = 0;
  for (int64_t i = 0; i < x.numel(); ++i) s += a[i];
  *total.data_ptr<float>() = static_cast<float>(s);
  *rows.data_ptr<int32_t>() = x.ndim() == 0 ? 1 : static_cast<int32_t>(x.shape(0));
}

void checked_sqrt(const pk::Tensor& x, pk::Tensor& y) {
  const float* a = x.data_ptr<float>();
  float* o = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (a[i] < 0) throw std::invalid_argument("negative input at " + std::to_string(i));
    o[i] = a[i] * 0.5f;
  }
  PK_CHECK(x.numel() < 1000, "too many elements: " << x.numel());
}

void pinned(const pk::Tensor& x, pk::Tensor& y) {
  for (int64_t i = 0; i < x.numel(); ++i)
    y.data_ptr<float>()[i] = x.data_ptr<float>()[i];
}

void all_attrs(const pk::Tensor& x, pk::Tensor& y, bool b, int8_t i8, uint16_t u16,
               int64_t i64, double f64) {
  // i64 arrives as a full 64-bit value: subtract 2**40 to keep the sum small.
  y.data_ptr<float>()[0] = static_cast<float>(
      (b ? 1000.0 : 0.0) + i8 + u16 + (i64 - (int64_t(1) << 40)) + f64
      + x.data_ptr<float>()[0]);
}
"""

FUNCTIONS = {
    "scale_add": None,
    "sum_and_rows": None,
    "checked_sqrt": None,
    "pinned": ["arg:float32[1]", "ret:float32[1]"],
    "all_attrs": None,
}


@pytest.fixture(scope="module")
def mod():
    names = [k for k, v in FUNCTIONS.items() if v is None]
    return load_cpp_inline("test_native_mod", SRC, names)


@pytest.fixture(scope="module")
def pinned_mod():
    return load_cpp_inline("test_native_pinned", SRC, {"pinned": FUNCTIONS["pinned"]})


def spec(shape, dtype=jnp.float32):
    return jax.ShapeDtypeStruct(shape, dtype)


def test_single_output_under_jit_nd(mod):
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    y = jnp.ones((3, 4), jnp.float32)
    f = jax.jit(lambda a, b: mod.scale_add(a, b, outs=spec((3, 4)), alpha=2.5))
    np.testing.assert_allclose(f(x, y), 2.5 * np.asarray(x) + 1)
    assert mod.scale_add.spec.tokens() == ["arg", "arg", "ret", "attr.alpha:float32"]


def test_zero_d_inputs_and_outputs(mod):
    x, y = jnp.float32(3.0), jnp.float32(0.5)
    np.testing.assert_allclose(mod.scale_add(x, y, outs=spec(()), alpha=2.0), 6.5)
    total, rows = mod.sum_and_rows(x, outs=[spec(()), spec((), jnp.int32)])
    assert float(total) == 3.0 and int(rows) == 1


def test_multiple_outputs_under_jit(mod):
    x = jnp.arange(6, dtype=jnp.float32).reshape(2, 3)
    f = jax.jit(lambda a: mod.sum_and_rows(a, outs=[spec(()), spec((), jnp.int32)]))
    total, rows = f(x)
    assert float(total) == 15.0 and int(rows) == 2


def test_vmap_is_sequential_and_correct(mod):
    x = jnp.arange(12, dtype=jnp.float32).reshape(3, 4)
    out = jax.vmap(lambda a: mod.scale_add(a, a, outs=spec((4,)), alpha=1.0))(x)
    np.testing.assert_allclose(out, 2 * np.asarray(x))


def test_all_attribute_types_decoded(mod):
    res = mod.all_attrs(
        jnp.ones(1, jnp.float32),
        outs=spec((1,)),
        b=True,
        i8=-3,
        u16=60000,
        i64=2**40 + 5,
        f64=0.25,
    )
    assert float(res[0]) == 1000 - 3 + 60000 + 5 + 0.25 + 1


def test_documented_raw_ffi_call_form(mod):
    x = jnp.arange(4, dtype=jnp.float32)
    out = jax.jit(
        lambda a: jax.ffi.ffi_call("test_native_mod.scale_add", spec((4,)))(
            a, a, alpha=np.float32(3)
        )
    )(x)
    np.testing.assert_allclose(out, 4 * np.asarray(x))


def test_cpp_exception_becomes_python_error(mod):
    x = jnp.array([1.0, -2.0], jnp.float32)
    with pytest.raises(Exception, match=r"checked_sqrt: negative input at 1"):
        jax.block_until_ready(
            jax.jit(lambda a: mod.checked_sqrt(a, outs=spec((2,))))(x)
        )
    big = jnp.ones(2000, jnp.float32)
    with pytest.raises(
        Exception,
        match=r"PK_CHECK\(x.numel\(\) < 1000\) failed .*"
        r"too many elements: 2000",
    ):
        jax.block_until_ready(mod.checked_sqrt(big, outs=spec((2000,))))


def test_wrong_dtype_is_always_an_error(mod):
    xi = jnp.arange(4, dtype=jnp.int32)
    # Through the module: the C++ data_ptr<float>() check fires.
    with pytest.raises(
        Exception,
        match=r"input 0 'x' has dtype int32 but the kernel "
        r"reads it as float32",
    ):
        jax.block_until_ready(mod.scale_add(xi, xi, outs=spec((4,)), alpha=1.0))
    # Through a raw ffi_call, bypassing every Python check: still an error.
    with pytest.raises(Exception, match=r"output 0 'out' has dtype int32"):
        jax.block_until_ready(
            jax.ffi.ffi_call("test_native_mod.scale_add", spec((4,), jnp.int32))(
                jnp.ones(4), jnp.ones(4), alpha=np.float32(1)
            )
        )


def test_pinned_dtype_and_rank_checked_in_python_and_cpp(pinned_mod):
    f = pinned_mod.pinned
    with pytest.raises(
        KernelCallError,
        match=r"input 0 has dtype int32, the spec pins "
        r"float32 \('arg:float32\[1\]'\)",
    ):
        f(jnp.ones(3, jnp.int32), outs=spec((3,)))
    with pytest.raises(
        KernelCallError, match=r"input 0 has rank 2, the spec pins rank 1"
    ):
        f(jnp.ones((3, 1), jnp.float32), outs=spec((3,)))
    with pytest.raises(KernelCallError, match=r"output 0 has rank 0, the spec pins"):
        f(jnp.ones(3, jnp.float32), outs=spec(()))
    raw = jax.ffi.ffi_call("test_native_pinned.pinned", spec((2, 2)))
    with pytest.raises(
        Exception,
        match=r"test_native_pinned.pinned: input 0 has rank "
        r"2, expected 1",
    ):
        jax.block_until_ready(raw(jnp.ones((2, 2), jnp.float32)))
    raw = jax.ffi.ffi_call("test_native_pinned.pinned", spec((2,)))
    with pytest.raises(Exception, match=r"input 0 has dtype int32, expected float32"):
        jax.block_until_ready(raw(jnp.ones(2, jnp.int32)))


def test_call_argument_errors(mod):
    x = jnp.ones(3, jnp.float32)
    with pytest.raises(KernelCallError, match=r"expected 2 input array\(s\)"):
        mod.scale_add(x, outs=spec((3,)), alpha=1.0)
    with pytest.raises(KernelCallError, match=r"expected 1 output spec\(s\) in `outs`"):
        mod.scale_add(x, x, outs=[spec((3,)), spec((3,))], alpha=1.0)
    with pytest.raises(
        KernelCallError,
        match=r"test_native_mod.scale_add: unknown keyword argument 'beta' "
        r"\(parameters: alpha: float32\); pass only the kernel's parameters",
    ):
        mod.scale_add(x, x, outs=spec((3,)), beta=1.0)
    with pytest.raises(
        KernelCallError,
        match=r"test_native_mod.scale_add: missing keyword argument 'alpha' "
        r"\(parameters: alpha: float32\); pass it as a keyword",
    ):
        mod.scale_add(x, x, outs=spec((3,)))
    with pytest.raises(KernelCallError, match=r"scale_add: missing keyword argument "
                       r"'outs'; this kernel takes its outputs per call"):
        mod.scale_add(x, x, alpha=1.0)
    with pytest.raises(
        KernelCallError, match=r"attribute 'i8'=300 cannot be converted"
    ):
        mod.all_attrs(x, outs=spec((1,)), b=True, i8=300, u16=1, i64=1, f64=1.0)
    with pytest.raises(KernelCallError, match=r"attribute 'alpha' is a traced value"):
        jax.jit(lambda a, s: mod.scale_add(a, a, outs=spec((3,)), alpha=s))(x, 1.0)
    with pytest.raises(AttributeError, match=r"has no function 'nope'; it exports"):
        _ = mod.nope


def test_identical_reload_is_a_noop(mod):
    names = [k for k, v in FUNCTIONS.items() if v is None]
    assert load_cpp_inline("test_native_mod", SRC, names) is mod


def test_compile_error_carries_output_and_kept_source():
    bad = "void broken(const pk::Tensor& x, pk::Tensor& y) { this is not C++; }"
    with pytest.raises(
        CompilationError,
        match=r"module 'broken_mod': compilation "
        r"failed .*Source kept at .*broken_mod.cpp",
    ) as info:
        load_cpp_inline("broken_mod", bad, ["broken"])
    err = info.value
    assert "error" in err.output and "broken_mod.cpp:1" in err.output
    assert Path(err.source_path).read_text().count("this is not C++") == 1
    assert "-O3" in err.command


def test_edited_source_reloads_under_same_name(tmp_path):
    template = """void bump(const pk::Tensor& x, pk::Tensor& y) {
      for (int64_t i = 0; i < x.numel(); ++i)
        y.data_ptr<float>()[i] = x.data_ptr<float>()[i] + STEP;
    }"""
    path = tmp_path / "bump.cpp"
    path.write_text(template.replace("STEP", "1"))
    x = jnp.zeros(2, jnp.float32)
    first = load_cpp_file(path, ["bump"], name="edit_mod")
    np.testing.assert_allclose(first.bump(x, outs=spec((2,))), 1)
    path.write_text(template.replace("STEP", "2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a reload is not worth a warning any more
        second = load_cpp_file(path, ["bump"], name="edit_mod")
    assert second.target("bump") != first.target("bump")
    np.testing.assert_allclose(jax.jit(lambda a: second.bump(a, outs=spec((2,))))(x), 2)
    # The raw documented name forwards to the latest build, also in an executable
    # compiled before the reload; each module object keeps its own build.
    raw = jax.jit(lambda a: jax.ffi.ffi_call("edit_mod.bump", spec((2,)))(a))
    np.testing.assert_allclose(raw(x), 2)
    np.testing.assert_allclose(first.bump(x, outs=spec((2,))), 1)
    path.write_text(template.replace("STEP", "1"))
    load_cpp_file(path, ["bump"], name="edit_mod")  # the first text, loaded again
    np.testing.assert_allclose(raw(x), 1)  # same executable, latest load


def test_a_documented_name_another_backend_owns_is_refused():
    from polykernel.ffi import targets

    src = "void taken(const pk::Tensor& x, pk::Tensor& y) {}"
    mod = load_cpp_inline("owned_elsewhere", src, ["taken"], auto_register=False)
    fn = mod.taken
    targets.register("claimed_prefix.taken", fn.handler_address, platform="cpu",
                     identity="user:claimed", backend="user", label="by hand",
                     owner=mod)  # fmt: skip
    with pytest.raises(
        pk.KernelRegistrationError,
        match=r"cannot publish 'claimed_prefix.taken': that FFI target is already "
        r"registered by user \(by hand\).*target_prefix=.*auto_register=False",
    ):
        load_cpp_inline("owned_elsewhere", src, ["taken"],
                        target_prefix="claimed_prefix")  # fmt: skip


def test_options_change_the_key_and_bad_options_fail(mod):
    with pytest.raises(
        Exception, match=r"CompileOptions\(optimization=7\) is not valid"
    ):
        CompileOptions(optimization=7)
    assert CompileOptions(extra_cflags="-g").extra_cflags == ("-g",)


def test_missing_file_is_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="cannot read source file"):
        load_cpp_file(tmp_path / "nope.cpp", ["f"])
