"""Inputs of an eager call (``contract.outs.as_array``): a NumPy array becomes the
array ``jnp.asarray`` would give, without compiling an XLA program per shape."""

from __future__ import annotations

import jax
import jax.monitoring
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel.contract.outs import as_array
from polykernel.errors import KernelTypeError

_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


@pytest.fixture
def compiles():
    """The XLA compiles JAX reports while the test runs."""
    seen: list[str] = []

    def listen(event: str, duration: float, **kwargs) -> None:
        if event == _COMPILE_EVENT:
            seen.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    yield seen
    jax.monitoring.unregister_event_duration_listener(listen)


@pytest.mark.parametrize(
    "value",
    [
        np.arange(7, dtype=np.float32),
        np.arange(12, dtype=np.float64).reshape(3, 4),  # float32 unless x64 is on
        np.arange(5, dtype=np.int64)[::2],  # a strided view
        np.array([True, False]),
        np.array([1 + 2j], dtype=np.complex128),
        np.array(3.5, dtype=np.float16),  # 0-d
        np.zeros((0, 3), np.uint8),
    ],
    ids=["f32", "f64", "strided-i64", "bool", "c128", "0d-f16", "empty-u8"],
)
def test_a_numpy_array_becomes_what_jnp_asarray_gives(value):
    got, want = as_array("w", 0, value), jnp.asarray(value)
    assert isinstance(got, jax.Array)
    assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, False)
    assert got.committed == want.committed
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_the_array_owns_its_buffer():
    source = np.ones(1 << 16, np.float32)
    got = as_array("w", 0, source)
    source[:] = 5.0  # the caller reuses its buffer
    assert float(np.asarray(got).max()) == 1.0


def test_a_numpy_input_of_a_new_shape_compiles_nothing(compiles):
    as_array("w", 0, np.ones(4097, np.float32))  # a shape no test used before
    as_array("w", 1, np.ones((3, 4099), np.int32))
    assert compiles == []  # jnp.asarray compiles one program per shape and dtype


def test_an_eager_kernel_call_compiles_only_its_own_program(compiles):
    op = pk.XLACustomKernel("tests.contract.inputs.add")
    op.def_jax_raw_kernel(lambda outs, **kw: lambda x, y: x + y, platform="cpu")
    spec = jax.ShapeDtypeStruct((4103,), jnp.float32)
    x = np.arange(4103, dtype=np.float32)
    out = op(x, x, outs=spec)
    np.testing.assert_array_equal(np.asarray(out), 2 * x)
    assert len(compiles) == 1  # the call's program; no conversion programs


@pytest.mark.parametrize(
    "value",
    [np.array(["a"]), np.array([1], dtype=object), np.array(["2020-01-01"], "M8[D]")],
    ids=["str", "object", "datetime"],
)
def test_an_array_jax_cannot_take_is_refused_by_name(value):
    refused = (r"(?s)w: input 2 \(ndarray\) is not an array JAX accepts: .* "
               r"Pass a numeric NumPy or JAX array")  # fmt: skip
    with pytest.raises(KernelTypeError, match=refused):
        as_array("w", 2, value)


@pytest.mark.parametrize("dtype", [">f4", ">i8", "<f8", "<c8"])
def test_an_array_in_either_byte_order_converts(dtype):
    value = np.arange(3).astype(dtype)  # big-endian data read from a file
    got = as_array("w", 0, value)
    assert got.dtype == jnp.asarray(value.astype(value.dtype.newbyteorder("="))).dtype
    np.testing.assert_array_equal(np.asarray(got), [0, 1, 2])


@pytest.mark.parametrize(
    ("value", "dtype"),
    [
        (np.linspace(-3, 3, 11), jnp.float32),  # float64 rounded to float32
        (np.array([np.inf, -0.0, np.nan, 1e-40]), jnp.float32),  # inf, nan, tiny
        (np.array([0, 1, 2**31, -(2**31) - 1], np.int64), jnp.int32),  # wraps
        (np.array([3, 4], np.uint8), jnp.int32),
        (np.array([True, False]), jnp.float32),
        (np.array([0, 2], np.int64), bool),  # not within its kind: jnp.asarray
        (np.array([1.5, -2.5]), jnp.int32),  # a float to an integer: jnp.asarray
        (np.float64(2.5), jnp.float32),  # a NumPy scalar
        ([1.0, 2.0], jnp.float32),  # a list: jnp.asarray
        (np.arange(6.0).reshape(2, 3)[:, ::2], jnp.float32),  # strided
    ],
    ids=[
        "f64",
        "f64-edges",
        "i64-wrap",
        "u8",
        "bool-f32",
        "int-bool",
        "float-int",
        "scalar",
        "list",
        "strided",
    ],
)
def test_as_dtype_gives_what_jnp_asarray_gives(value, dtype):
    from polykernel.contract.outs import as_dtype

    got, want = as_dtype(value, dtype), jnp.asarray(value, dtype)
    assert isinstance(got, jax.Array)
    assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, False)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_catalog_call_on_float64_numpy_compiles_no_conversion(compiles):
    """The catalog's wrappers take NumPy float64 and int64 as users have them:
    converting them compiles no XLA program of its own on an eager call."""
    from polykernel.catalog import csrmv, scaled_add

    x = np.linspace(0, 1, 37)  # float64, a shape no other test uses
    first = scaled_add(x, x, alpha=2.0, backend="jax_raw")
    before = len(compiles)
    y = np.linspace(1, 2, 37)  # same shape again: no compile at all now
    second = scaled_add(y, x, alpha=2.0, backend="jax_raw")
    assert len(compiles) == before
    np.testing.assert_allclose(np.asarray(first), 3 * x.astype(np.float32), 1e-6)
    np.testing.assert_allclose(np.asarray(second), 2 * y + x, 1e-6)
    indptr = np.array([0, 1, 3], np.int64)
    got = csrmv(np.array([1.0, 2.0, 3.0]), np.array([0, 0, 1], np.int64), indptr,
                np.array([1.0, 10.0]), shape=(2, 2), backend="jax_raw")  # fmt: skip
    assert np.asarray(got).tolist() == [1.0, 32.0]
