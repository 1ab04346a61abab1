"""The issue's named failure classes, each with its own table.

- ``FFI_CALL``: a raw ``jax.ffi.ffi_call`` to a Numba target with a misnamed,
  missing, extra or mistyped attribute, or a buffer of the wrong rank or dtype,
  is refused by the handler with a message naming the attribute or buffer;
- ``ATTRIBUTE_RANGE``: an attribute value that is ``None`` or outside its
  declared type's range raises instead of becoming NaN/inf (or wrapping);
- ``NATIVE_CALL``: bad calls of a compiled C++ function, through its module and
  as a raw ``ffi_call`` (the generated wrapper checks every buffer and attribute);
- ``OUTS_VS_KERNEL``: ``outs`` that contradict what a ``jax_raw`` kernel returns
  raise our message naming the output, not an MLIR verifier error.

The other named classes live with their kind: empty and malformed results files
in ``test_rel_files.py`` (``RESULT_FILES``), wrong argument types deep in the API
in ``test_rel_api.py`` (``set_default-platform-list``, ``get_primitives_by_tags-int``,
...) and CLI errors in ``test_rel_cli.py``; the cross-process lock of the tuned
defaults in ``test_rel_lock.py``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest
import zygote
from reliability_support import F3, S, assert_usable, bad, run_case

import polykernel as pk
from polykernel.catalog._support import has_cxx

X = jnp.ones(3, jnp.float32)
ATTRS = {"alpha": np.float32(2), "shift": np.float32(1)}


@numba.njit
def affine(x, out, alpha, shift):
    for i in range(out.size):
        out[i] = x[i] * alpha + shift


def _target() -> str:
    kernel = pk.numba_kernel(affine, F3)
    kernel(X, **ATTRS)
    (target,) = kernel._targets.values()
    return target


TARGET = _target()


def _raw(outs=F3, *args, **attrs):
    return lambda: jax.ffi.ffi_call(TARGET, outs)(*(args or (X,)), **attrs)


FFI_CALL = [
    bad("attribute-misnamed", _raw(alpha=np.float32(2), shiftt=np.float32(1)),
        Exception, r"attribute 1 must be named 'shift' .*got 'shiftt'"),
    bad("attribute-misnamed-first", _raw(a=np.float32(2), shift=np.float32(1)),
        Exception, r"attribute 0 must be named 'alpha'.*got 'a'"),
    bad("attribute-missing", _raw(alpha=np.float32(2)),
        Exception, r"'affine': expected 1 inputs, 1 outputs and 2 attributes, got 1, 1 "
        r"and 1"),
    bad("attribute-extra", _raw(**ATTRS, zeta=np.float32(0)),
        Exception, r"2 attributes, got 1, 1 and 3"),
    bad("attribute-wrong-dtype", _raw(alpha=np.int32(7), shift=np.float32(1)),
        Exception, r"attribute alpha:float32 must be a scalar of that dtype, got a "
        r"scalar of dtype int32"),
    bad("attribute-wrong-kind", _raw(alpha=np.float32(2), shift="one"),
        Exception, r"attribute shift:float32 must be a scalar of that dtype, got a "
        r"string"),
    bad("output-rank-lower", _raw(S((), jnp.float32), **ATTRS),
        Exception, r"output 0 must be float32\[1\].*rank 0"),
    bad("output-rank-higher", _raw(S((4, 3), jnp.float32), **ATTRS),
        Exception, r"input 0 \(float32\[1\]\) carries 0 leading batch dims but the "
        r"outputs carry 1"),
    bad("output-wrong-dtype", _raw(S((3,), jnp.int32), **ATTRS),
        Exception, r"output 0 must be float32\[1\]"),
    bad("input-wrong-dtype", _raw(F3, jnp.ones(3, jnp.int32), **ATTRS),
        Exception, r"input 0 must be float32\[1\]"),
    bad("input-rank-lower", _raw(F3, jnp.float32(1), **ATTRS),
        Exception, r"input 0 must be float32\[1\].*rank 0"),
    bad("inputs-too-many", _raw(F3, X, X, **ATTRS),
        Exception, r"expected 1 inputs, .* got 2, 1 and 2"),
]  # fmt: skip


@pytest.mark.parametrize("case", FFI_CALL)
def test_raw_ffi_call_to_numba_target(case):
    run_case(case)
    good = jax.ffi.ffi_call(TARGET, F3)(X, **ATTRS)
    np.testing.assert_array_equal(good, [3, 3, 3])


# -- attribute values ----------------------------------------------------------------
_CPP = """
void attrs(const pk::Tensor& x, pk::Tensor& y, float alpha, int32_t n, uint16_t u,
           int8_t small, bool flag, double wide) {
  const float* a = x.data_ptr<float>();
  float* o = y.data_ptr<float>();
  for (int64_t i = 0; i < y.numel(); ++i)
    o[i] = alpha * a[i] + n + u + small + (flag ? 1000 : 0) + static_cast<float>(wide);
}
"""
GOOD = {"alpha": 2.0, "n": 1, "u": 2, "small": 3, "flag": False, "wide": 0.5}


def _module():
    return pk.load_cpp_inline("reliability_attrs", _CPP, ["attrs"])


def _attrs(**changes):
    return lambda: _module().attrs(X, outs=F3, **{**GOOD, **changes})


def _run_then_call_the_module(case) -> None:
    """Run a bad row; a good call of the same native function still computes."""
    run_case(case)
    np.testing.assert_allclose(_attrs()(), np.full(3, 2 + 1 + 2 + 3 + 0.5))


needs_cxx = pytest.mark.skipif(not has_cxx(), reason="needs a host C++ compiler")
ATTRIBUTE_RANGE = [
    bad("float32-none", _attrs(alpha=None),
        pk.KernelCallError, r"attribute 'alpha'=None cannot be converted to float32: "
        r"expected a real number, got NoneType"),
    bad("int32-none", _attrs(n=None),
        TypeError, r"attribute 'n'=None cannot be converted to int32"),
    bad("bool-none", _attrs(flag=None),
        TypeError, r"attribute 'flag'=None cannot be converted to bool"),
    bad("float32-overflow", _attrs(alpha=1e300),
        pk.AttributeValueError, r"attribute 'alpha'=1e\+300 cannot be converted to "
        r"float32: out of its range \(it would become inf\)"),
    bad("float32-negative-overflow", _attrs(alpha=-3.5e38),
        ValueError, r"'alpha'=-3.5e\+38 .* out of its range"),
    bad("float64-int-overflow", _attrs(wide=10**400),
        ValueError, r"attribute 'wide'=1000.* cannot be converted to float64: out"),
    bad("int32-overflow", _attrs(n=2**40),
        ValueError, r"attribute 'n'=1099511627776 cannot be converted to int32: out "
        r"of its range \[-2147483648, 2147483647\]"),
    bad("int32-underflow", _attrs(n=-(2**31) - 1),
        ValueError, r"'n'=-2147483649 .* out of its range"),
    bad("uint16-negative", _attrs(u=-1),
        ValueError, r"attribute 'u'=-1 cannot be converted to uint16: out of its "
        r"range \[0, 65535\]"),
    bad("uint16-overflow", _attrs(u=65536),
        ValueError, r"'u'=65536 .* \[0, 65535\]"),
    bad("int8-overflow", _attrs(small=128),
        ValueError, r"'small'=128 .* \[-128, 127\]"),
    bad("int8-numpy-int64-overflow", _attrs(small=np.int64(300)),
        ValueError, r"'small'=.*300.* \[-128, 127\]"),
    bad("int32-fractional", _attrs(n=1.5),
        ValueError, r"'n'=1.5 cannot be converted to int32: an integer attribute "
        r"needs an integral value"),
    bad("int32-nan", _attrs(n=math.nan),
        ValueError, r"'n'=nan .* integral value"),
    bad("int32-inf", _attrs(n=math.inf),
        ValueError, r"'n'=inf .* integral value"),
    bad("bool-two", _attrs(flag=2),
        ValueError, r"'flag'=2 cannot be converted to bool: a bool attribute takes"),
    bad("float32-string", _attrs(alpha="1.5"),
        TypeError, r"'alpha'='1.5' .* expected a real number, got str"),
    bad("float32-complex", _attrs(alpha=1j),
        TypeError, r"'alpha'=1j .* got complex"),
    bad("float32-array", _attrs(alpha=np.ones(2)),
        TypeError, r"'alpha'=array.* got ndarray"),
    bad("int32-list", _attrs(n=[1]),
        TypeError, r"'n'=\[1\] .* got list"),
]  # fmt: skip


@needs_cxx
@pytest.mark.parametrize("case", ATTRIBUTE_RANGE)
def test_attribute_values_out_of_range_raise(case):
    _run_then_call_the_module(case)


@needs_cxx
def test_attribute_edge_values_that_fit_are_kept():
    f = _module().attrs
    got = f(X, outs=F3, **{**GOOD, "n": 2**31 - 1, "u": 0, "small": -128})
    np.testing.assert_allclose(got, np.full(3, 2 + (2**31 - 1) + 0 - 128 + 0.5))
    explicit_nan = f(X, outs=F3, **{**GOOD, "alpha": math.nan})  # the caller's NaN
    assert np.isnan(np.asarray(explicit_nan)).all()
    integral = f(X, outs=F3, **{**GOOD, "n": 4.0, "flag": True})
    np.testing.assert_allclose(integral, np.full(3, 2 + 4 + 2 + 3 + 1000 + 0.5))


# -- calls of a native (C++) function, through the module and as a raw ffi_call ------
RAW_ATTRS = {"alpha": np.float32(2), "n": np.int32(1), "u": np.uint16(2),
             "small": np.int8(3), "flag": False, "wide": np.float64(0.5)}  # fmt: skip


def _renamed(attrs: dict, old: str, new: str) -> dict:
    return {new if k == old else k: v for k, v in attrs.items()}


def _native(*args, outs=F3, **attrs):
    return lambda: _module().attrs(*args, outs=outs, **{**GOOD, **attrs})


def _native_raw(*args, **attrs):
    return lambda: jax.ffi.ffi_call(_module().target("attrs"), F3)(*args, **attrs)


NATIVE_CALL = [
    bad("input-wrong-dtype", _native(jnp.ones(3, jnp.int32)),
        Exception, r"reliability_attrs.attrs: input 0 'x' has dtype int32 but the "
        r"kernel reads it as float32"),
    bad("output-wrong-dtype", _native(X, outs=S((3,), jnp.int32)),
        Exception, r"output 0 'y' has dtype int32 but the kernel reads it as float32"),
    bad("inputs-too-many", _native(X, X),
        pk.KernelCallError, r"expected 1 input array\(s\) .* got 2"),
    bad("inputs-none", _native(),
        TypeError, r"expected 1 input array\(s\) .* got 0"),
    bad("outs-too-many", _native(X, outs=[F3, F3]),
        pk.KernelCallError, r"expected 1 output spec\(s\) in `outs`, got 2"),
    bad("outs-int", _native(X, outs=3),
        pk.KernelRegistrationError, r"reliability_attrs.attrs: outs must be a "
        r"jax.ShapeDtypeStruct or a non-empty list/tuple \(or pytree\) of them, one "
        r"per kernel output \(got 3\)"),
    bad("outs-list-of-str", _native(X, outs=["f32"]),
        TypeError, r"outs\[0\] must have .shape and .dtype, .* \(got str: 'f32'\)"),
    bad("attribute-unknown", _native(X, beta=1.0),
        pk.KernelCallError, r"reliability_attrs.attrs: unknown keyword argument "
        r"'beta' \(parameters: alpha: float32, n: int32, u: uint16, small: int8, "
        r"flag: bool, wide: float64\)"),
    bad("attribute-missing", lambda: _module().attrs(X, outs=F3, alpha=1.0),
        TypeError, r"missing keyword arguments 'n', 'u', 'small', 'flag', 'wide' "
        r"\(parameters: alpha: float32, .*\); pass them as keywords"),
    bad("function-unknown", lambda: _module().nope,
        AttributeError, r"native module 'reliability_attrs' has no function 'nope'; "
        r"it exports \['attrs'\]"),
    bad("raw-input-wrong-dtype", _native_raw(jnp.ones(3, jnp.int32), **RAW_ATTRS),
        Exception, r"input 0 'x' has dtype int32 but the kernel reads it as float32"),
    bad("raw-attributes-missing", _native_raw(X),
        Exception, r"called with 0 attribute\(s\) \(none\), expected 6"),
    bad("raw-attribute-misnamed",
        _native_raw(X, **_renamed(RAW_ATTRS, "alpha", "alphaa")),
        Exception, r"expected attribute 'alpha' but the call passes 'alphaa'"),
    bad("raw-attribute-wrong-dtype",
        _native_raw(X, **{**RAW_ATTRS, "alpha": np.int32(9)}),
        Exception, r"attribute 'alpha' has type int32, expected float32"),
]  # fmt: skip


@needs_cxx
@pytest.mark.parametrize("case", NATIVE_CALL)
def test_native_function_bad_calls(case):
    _run_then_call_the_module(case)


# -- outs vs what a jax_raw kernel returns ------------------------------------------
def _op(name, kernel):
    op = pk.XLACustomKernel(f"reliability.named.{name}")
    op.def_jax_raw_kernel(lambda outs, **kw: kernel)
    return op


DOUBLE = _op("double", lambda x: 2 * x)
PAIR = _op("pair", lambda x: (x, x > 0))
SUM = _op("sum", lambda x: jnp.sum(x))
DECLARED = (
    r"XLACustomKernel 'reliability.named.{}': .*output {}: the kernel returned {}"
)

OUTS_VS_KERNEL = [
    bad("longer", lambda: DOUBLE(X, outs=S((4,), jnp.float32)),
        pk.KernelCompilationError,
        DECLARED.format("double", 0, r"float32\[3\] but `outs\[0\]` declares "
                        r"float32\[4\]")),
    bad("higher-rank", lambda: DOUBLE(X, outs=S((3, 1), jnp.float32)),
        pk.KernelCompilationError, r"declares float32\[3, 1\]"),
    bad("scalar-declared-vector", lambda: SUM(X, outs=F3),
        pk.KernelCompilationError,
        DECLARED.format("sum", 0, r"float32\[\] but `outs\[0\]` declares")),
    bad("dtype", lambda: DOUBLE(X, outs=S((3,), jnp.int32)),
        pk.KernelCompilationError, r"float32\[3\] but `outs\[0\]` declares int32\[3\]"),
    bad("second-output", lambda: PAIR(X, outs=[F3, F3]),
        pk.KernelCompilationError,
        DECLARED.format("pair", 1, r"bool\[3\] but `outs\[1\]` declares float32\[3\]")),
    bad("under-jit", lambda: jax.jit(lambda x: DOUBLE(x, outs=S((2,), X.dtype)))(X),
        pk.KernelCompilationError, r"output 0: the kernel returned float32\[3\]"),
    bad("under-vmap",
        lambda: jax.vmap(lambda x: DOUBLE(x, outs=S((4,), X.dtype)))(jnp.ones((2, 3))),
        pk.KernelCompilationError, r"output 0: the kernel returned"),
    bad("under-grad",
        lambda: jax.grad(lambda x: DOUBLE(x, outs=S((), X.dtype)).sum())(X),
        NotImplementedError, r"Differentiation rule for 'reliability.named.double'"),
    bad("pytree-outs", lambda: PAIR(X, outs={"a": F3, "b": S((3,), jnp.int8)}),
        pk.KernelCompilationError, r"output 1: .* declares int8\[3\]"),
]  # fmt: skip


@pytest.mark.parametrize("case", OUTS_VS_KERNEL)
def test_outs_contradicting_a_jax_raw_kernel_name_the_output(case):
    run_case(case)
    np.testing.assert_array_equal(DOUBLE(X, outs=F3), [2, 2, 2])


def test_cli_module_calling_sys_exit_exits_2_in_a_real_process(tmp_path, run_env):
    module = tmp_path / "exits.py"
    module.write_text("import sys\nsys.exit(0)\n")  # even a 'success' exit
    out = zygote.run(  # a process of its own, forked by the zygote
        ["-m", "polykernel.cli", "list", "--no-catalog", "-m", str(module)],
        env=run_env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert "called sys.exit(0) while being imported" in out.stderr
    assert "Traceback" not in out.stderr
    assert_usable()
