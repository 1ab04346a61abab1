"""A raw ``jax.ffi.ffi_call`` to a Numba target is checked, never trusted.

The handler checks every buffer's dtype and rank, the batch dims, and each
attribute's type, dtype *and name* (positions alone would accept a misnamed one).
"""

from __future__ import annotations

import shutil
import subprocess

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest

from polykernel.backends.numba import numba_kernel
from polykernel.ffi import abi

S = jax.ShapeDtypeStruct


@numba.njit
def affine(x, out, alpha, shift):
    for i in range(out.size):
        out[i] = x[i] * alpha + shift


@numba.njit
def fill(out, value):
    for i in range(out.size):
        out[i] = value


@numba.njit
def two_outputs(x, a, b):
    for i in range(x.size):
        a[i] = x[i]
        b[i] = -x[i]


def _target(kernel, outs, *args, **attrs):
    f = numba_kernel(kernel, outs)
    f(*args, **attrs)
    (target,) = f._targets.values()
    return target


def test_misnamed_attribute_is_refused():
    target = _target(affine, S((3,), jnp.float32), jnp.ones(3),
                     alpha=np.float32(2), shift=np.float32(1))  # fmt: skip
    call = jax.ffi.ffi_call(target, S((3,), jnp.float32))
    good = call(jnp.ones(3), alpha=np.float32(2), shift=np.float32(1))
    np.testing.assert_allclose(good, np.full(3, 3.0))
    with pytest.raises(
        Exception, match=r"attribute 1 must be named 'shift' .*got 'shiftt'"
    ):
        call(jnp.ones(3), alpha=np.float32(2), shiftt=np.float32(1)).block_until_ready()
    with pytest.raises(Exception, match=r"attribute 0 must be named 'alpha'.*got 'a'"):
        call(jnp.ones(3), a=np.float32(2), shift=np.float32(1)).block_until_ready()


def test_output_of_the_wrong_rank_is_refused():
    target = _target(affine, S((3,), jnp.float32), jnp.ones(3),
                     alpha=np.float32(2), shift=np.float32(1))  # fmt: skip
    attrs = {"alpha": np.float32(2), "shift": np.float32(1)}
    higher = jax.ffi.ffi_call(target, S((4, 3), jnp.float32))
    with pytest.raises(
        Exception,
        match=r"input 0 \(float32\[1\]\) carries 0 leading batch dims but the "
        r"outputs carry 1",
    ):
        higher(jnp.ones(3), **attrs).block_until_ready()
    lower = jax.ffi.ffi_call(target, S((), jnp.float32))
    with pytest.raises(Exception, match=r"output 0 must be float32\[1\].*rank 0"):
        lower(jnp.ones(3), **attrs).block_until_ready()
    # with batch dims on every buffer it is a (vmap-style) batched call
    ok = higher(jnp.ones((4, 3)), **attrs)
    np.testing.assert_allclose(ok, np.full((4, 3), 3.0))


def test_kernel_without_inputs_cannot_be_batched():
    target = _target(fill, S((2,), jnp.float32), value=np.float32(5))
    call = jax.ffi.ffi_call(target, S((3, 2), jnp.float32))
    with pytest.raises(Exception, match=r"output 0 must be float32\[1\].*rank 2"):
        call(value=np.float32(5)).block_until_ready()


def test_outputs_with_different_batch_dims_are_refused():
    target = _target(two_outputs, [S((2,), jnp.float32)] * 2, jnp.ones(2))
    call = jax.ffi.ffi_call(target, [S((3, 2), jnp.float32), S((4, 2), jnp.float32)])
    with pytest.raises(
        Exception, match=r"batch dimensions of output 1 differ from output 0's"
    ):
        jax.block_until_ready(call(jnp.ones((3, 2))))


PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "xla/ffi/api/c_api.h"
int main(void) {
  printf("%ld %ld %ld\n",
         (long)(offsetof(XLA_FFI_CallFrame, attrs) + offsetof(XLA_FFI_Attrs, names)),
         (long)offsetof(XLA_FFI_ByteSpan, ptr), (long)offsetof(XLA_FFI_ByteSpan, len));
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a C compiler")
def test_attribute_name_offsets_match_installed_headers(tmp_path):
    src, exe = tmp_path / "probe.c", tmp_path / "probe"
    src.write_text(PROBE)
    subprocess.run(["gcc", "-I", jax.ffi.include_dir(), str(src), "-o", str(exe)],
                   check=True)  # fmt: skip
    got = tuple(map(int, subprocess.check_output([str(exe)]).split()))
    assert got == (abi.FRAME_ATTR_NAMES, abi.BYTESPAN_PTR, abi.BYTESPAN_LEN)
