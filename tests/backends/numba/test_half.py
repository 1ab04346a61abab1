"""float16 / bfloat16 in numba_kernel: float32 arithmetic by default, bits on request.

By default half-precision buffers reach the kernel as float32 arrays and float32
results are rounded to nearest even into half-precision outputs (NumPy's and
ml_dtypes' rounding, bit for bit); ``half_precision="bits"`` passes the raw bits
as uint16 arrays.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numba
import numpy as np
import pytest

from polykernel.backends.numba import numba_kernel
from polykernel.errors import KernelExecutionError, KernelRegistrationError

S = jax.ShapeDtypeStruct
HALF = [np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)]


@numba.njit
def axpb(x, y, out):
    for i in range(out.size):
        out[i] = x[i] * 3.0 + y[i]


@numba.njit
def copy(x, out):
    for i in range(out.size):
        out[i] = x[i]


@numba.njit
def accumulate(acc, y, out):
    # `out` aliases `acc`: reading out[i] sees the input's value
    for i in range(out.size):
        out[i] += y[i] * 0.5


@numba.njit
def negate_bits(x, out):
    for i in range(out.size):
        out[i] = x[i] ^ 0x8000


def _want(dtype, x, y):
    f32 = np.float32
    return (np.asarray(x).astype(f32) * f32(3.0) + np.asarray(y).astype(f32)).astype(
        dtype
    )


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_arithmetic_under_jit_and_vmap(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 7)).astype(np.float32).astype(dtype)
    y = rng.standard_normal(7).astype(np.float32).astype(dtype)
    f = numba_kernel(axpb, S((7,), dtype))
    got = jax.jit(f)(x[0], y)
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.asarray(got), _want(dtype, x[0], y))
    batched = jax.jit(jax.vmap(f, in_axes=(0, None)))(x, y)
    np.testing.assert_array_equal(np.asarray(batched), _want(dtype, x, y))
    seq = numba_kernel(axpb, S((7,), dtype), vmap_method="sequential")
    np.testing.assert_array_equal(np.asarray(jax.vmap(seq)(x, x)), _want(dtype, x, x))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_mixed_precision_buffers(dtype):
    x = np.linspace(-4, 4, 9, dtype=np.float32)
    to_half = numba_kernel(copy, S((9,), dtype))(x)
    np.testing.assert_array_equal(np.asarray(to_half), x.astype(dtype))
    to_single = numba_kernel(copy, S((9,), jnp.float32))(x.astype(dtype))
    np.testing.assert_array_equal(
        np.asarray(to_single), x.astype(dtype).astype(np.float32)
    )


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_aliasing_is_honoured(dtype):
    f = numba_kernel(accumulate, S((4,), dtype), input_output_aliases={0: 0})
    step = jax.jit(f, donate_argnums=0)
    acc = jnp.ones(4, dtype)
    for _ in range(3):
        acc = step(acc, jnp.full(4, 2.0, dtype))
    np.testing.assert_array_equal(np.asarray(acc), np.full(4, 4.0, dtype))
    batched = jax.vmap(f)(jnp.ones((2, 4), dtype), jnp.ones((2, 4), dtype))
    np.testing.assert_array_equal(np.asarray(batched), np.full((2, 4), 1.5, dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_raw_bits_on_request(dtype):
    x = np.array([1.5, -2.0, 0.0], dtype)
    f = numba_kernel(negate_bits, S((3,), dtype), half_precision="bits")
    np.testing.assert_array_equal(np.asarray(f(x)), -x)
    with pytest.raises(KernelRegistrationError, match="half_precision must be one"):
        numba_kernel(copy, S((3,), dtype), half_precision="float16")


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_rounding_matches_numpy_bit_for_bit(dtype):
    every_half = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dtype)
    back = numba_kernel(copy, S(every_half.shape, dtype))(every_half)
    back = np.asarray(back)
    nan = np.isnan(every_half.astype(np.float32))
    np.testing.assert_array_equal(back.view(np.uint16)[~nan],
                                  every_half.view(np.uint16)[~nan])  # fmt: skip
    assert np.isnan(back.astype(np.float32)[nan]).all()
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    singles = np.concatenate([bits.view(np.float32), _edges(dtype)])
    singles = singles[~np.isnan(singles)]
    got = numba_kernel(copy, S(singles.shape, dtype))(singles)
    with np.errstate(over="ignore"):  # overflow to inf is the expected rounding
        want = singles.astype(dtype)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint16), want.view(np.uint16))


def _edges(dtype) -> np.ndarray:
    """Ties, the largest finite values, overflow, subnormals, zeros, infinities."""
    half = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dtype)
    half = half[np.isfinite(half.astype(np.float32))].astype(np.float32)
    steps = np.nextafter(half, np.float32(np.inf))
    midpoints = (half.astype(np.float64)[:-1] + half.astype(np.float64)[1:]) / 2
    special = np.array([np.inf, -np.inf, 0.0, -0.0, 65520.0, 65519.99, 1e-8, -3e38],
                       np.float32)  # fmt: skip
    return np.concatenate([half, steps, midpoints.astype(np.float32), special])


@numba.njit
def raise_negative(x, out):
    for i in range(out.size):
        if x[i] < 0:
            raise ValueError("negative")
        out[i] = x[i]


def _rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def test_scratch_buffers_do_not_leak():
    n = 50_000  # 200 kB of float32 scratch per call
    f = numba_kernel(axpb, S((n,), jnp.float16))
    loop = jax.jit(lambda x: jax.lax.fori_loop(0, 400, lambda i, c: f(c, c) * 0.25, x))
    x = jnp.ones(n, jnp.float16)
    loop(x).block_until_ready()
    before = _rss()
    loop(x).block_until_ready()
    loop(x).block_until_ready()
    assert _rss() - before < 20 * 2**20  # 800 calls x 200 kB would be 160 MB
    g = numba_kernel(raise_negative, S((n,), jnp.float16))
    bad = -jnp.ones(n, jnp.float16)
    for _ in range(3):
        with pytest.raises(KernelExecutionError, match="raised ValueError: negative"):
            g(bad)
    before = _rss()
    for _ in range(100):
        with pytest.raises(KernelExecutionError):
            g(bad)
    assert _rss() - before < 10 * 2**20  # the error path frees the scratch too
