"""polykernel.ffi: offsets match the installed headers; names; registration; errors."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numba
import numpy as np
import pytest

from polykernel.backends.numba_cpu import numba_kernel
from polykernel.errors import KernelRegistrationError
from polykernel.ffi import abi, kernel_fingerprint, register_cpu_target, target_name

C_PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "xla/ffi/api/c_api.h"
#if XLA_FFI_API_MINOR >= 5  /* jaxlib 0.12 renamed the extension header struct */
typedef XLA_FFI_InternalExtension PK_Ext;
#else
typedef XLA_FFI_Extension_Base PK_Ext;
#endif
#define P(name, expr) printf("%s %ld\n", name, (long)(expr))
#define F(m) offsetof(XLA_FFI_CallFrame, m)
#define V(m) (offsetof(XLA_FFI_Metadata, api_version) \
              + offsetof(XLA_FFI_Api_Version, m))
int main(void) {
  P("FRAME_EXTENSION", offsetof(XLA_FFI_CallFrame, api) - 8);
  P("FRAME_API", offsetof(XLA_FFI_CallFrame, api));
  P("FRAME_STAGE", offsetof(XLA_FFI_CallFrame, stage));
  P("FRAME_ARGS_SIZE", F(args) + offsetof(XLA_FFI_Args, size));
  P("FRAME_ARGS", F(args) + offsetof(XLA_FFI_Args, args));
  P("FRAME_RETS_SIZE", F(rets) + offsetof(XLA_FFI_Rets, size));
  P("FRAME_RETS", F(rets) + offsetof(XLA_FFI_Rets, rets));
  P("FRAME_ATTRS_SIZE", F(attrs) + offsetof(XLA_FFI_Attrs, size));
  P("FRAME_ATTR_TYPES", F(attrs) + offsetof(XLA_FFI_Attrs, types));
  P("FRAME_ATTRS", F(attrs) + offsetof(XLA_FFI_Attrs, attrs));
  P("EXT_TYPE", offsetof(PK_Ext, type));
  P("METADATA_EXT_METADATA", offsetof(XLA_FFI_Metadata_Extension, metadata));
  P("METADATA_MAJOR", V(major_version));
  P("METADATA_MINOR", V(minor_version));
  P("METADATA_TRAITS", offsetof(XLA_FFI_Metadata, traits));
  P("BUFFER_DTYPE", offsetof(XLA_FFI_Buffer, dtype));
  P("BUFFER_DATA", offsetof(XLA_FFI_Buffer, data));
  P("BUFFER_RANK", offsetof(XLA_FFI_Buffer, rank));
  P("BUFFER_DIMS", offsetof(XLA_FFI_Buffer, dims));
  P("SCALAR_DTYPE", offsetof(XLA_FFI_Scalar, dtype));
  P("SCALAR_VALUE", offsetof(XLA_FFI_Scalar, value));
  P("API_ERROR_CREATE", offsetof(XLA_FFI_Api, XLA_FFI_Error_Create));
  P("ERROR_CREATE_ARGS_SIZE", XLA_FFI_Error_Create_Args_STRUCT_SIZE);
  P("STAGE_EXECUTE", XLA_FFI_ExecutionStage_EXECUTE);
  P("EXT_TYPE_METADATA", XLA_FFI_Extension_Metadata);
  P("ATTR_TYPE_SCALAR", XLA_FFI_AttrType_SCALAR);
  P("API_MINOR_HEADER", XLA_FFI_API_MINOR);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a C compiler")
def test_offsets_match_installed_jaxlib_headers(tmp_path):
    src = tmp_path / "probe.c"
    src.write_text(C_PROBE)
    exe = tmp_path / "probe"
    inc = jax.ffi.include_dir()
    subprocess.run(["gcc", "-I", inc, str(src), "-o", str(exe)], check=True)
    values = {
        k: int(v)
        for k, v in (
            ln.split()
            for ln in subprocess.check_output([str(exe)]).decode().splitlines()
        )
    }
    header_minor = values.pop("API_MINOR_HEADER")
    assert header_minor >= abi.API_MINOR  # a version this jaxlib understands
    for name, value in values.items():
        assert getattr(abi, name) == value, name
    for name, code in abi.DTYPE_CODES.items():
        assert (
            abi.dtype_code(np.dtype(name) if name != "bfloat16" else jnp.bfloat16)
            == code
        )


def test_dtype_helpers():
    assert abi.dtype_name(11) == "float32" and abi.dtype_name(99) == "code 99"
    with pytest.raises(TypeError, match="dtype int4 cannot cross the XLA FFI"):
        abi.dtype_code(jnp.int4)


def test_target_names_follow_content_and_options():
    def body(x):
        return x + 1

    plain = numba.njit(body)
    fast = numba.njit(fastmath=True)(body)
    checked = numba.njit(boundscheck=True)(body)
    prints = {kernel_fingerprint(k) for k in (plain, fast, checked)}
    assert len(prints) == 3
    assert kernel_fingerprint(plain) == kernel_fingerprint(numba.njit(body))
    name = target_name("pk_numba", "a", "b")
    assert name.isidentifier() and name != target_name("pk_numba", "a", "c")


def test_registration_is_idempotent_and_refuses_a_new_address():
    @numba.cfunc(numba.types.int64(numba.types.int64))
    def noop(frame):
        return 0

    # `noop` only supplies a second address; it is never registered.
    f = numba_kernel(
        numba.njit(lambda x, out: None), jax.ShapeDtypeStruct((1,), jnp.float32)
    )
    f(jnp.ones(1))
    (target,) = f._targets.values()
    from polykernel.ffi import registered_targets

    address = registered_targets()[target]
    assert register_cpu_target(target, address) is False
    with pytest.raises(
        KernelRegistrationError, match="already registered to a different"
    ):
        register_cpu_target(target, noop.address)


@numba.njit
def with_attrs(x, out, alpha, shift):
    for i in range(out.size):
        out[i] = x[i] * alpha + shift


def test_attribute_and_batch_mismatches_are_reported_by_the_handler():
    f = numba_kernel(with_attrs, jax.ShapeDtypeStruct((3,), jnp.float32))
    f(jnp.ones(3), alpha=np.float32(1), shift=np.int32(0))
    (target,) = f._targets.values()
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((3,), jnp.float32))
    with pytest.raises(
        Exception, match=r"attribute alpha:float32 must be a scalar.*float64"
    ):
        call(jnp.ones(3), alpha=np.float64(1), shift=np.int32(0)).block_until_ready()
    batched = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((4, 3), jnp.float32))
    with pytest.raises(
        Exception, match=r"batch dimensions of input 0 do not broadcast"
    ):
        batched(
            jnp.ones((2, 3)), alpha=np.float32(1), shift=np.int32(0)
        ).block_until_ready()
    ok = batched(jnp.ones((1, 3)), alpha=np.float32(2), shift=np.int32(1))
    np.testing.assert_allclose(ok, np.full((4, 3), 3.0))


def test_missing_numba_names_the_extra(run_env):
    code = (
        "import sys; sys.modules['numba'] = None\n"
        "import jax, jax.numpy as jnp\n"
        "from polykernel import numba_kernel, BackendUnavailableError\n"
        "try:\n"
        "    numba_kernel(None, jax.ShapeDtypeStruct((1,), jnp.float32))\n"
        "except BackendUnavailableError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=run_env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert re.search(
        r"'numba' package is not installed.*polykernel\[numba\]", out.stdout
    )
