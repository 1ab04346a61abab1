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

from polykernel.backends.numba import numba_kernel
from polykernel.backends.numba.fingerprint import Unfingerprintable, kernel_fingerprint
from polykernel.errors import BackendUnavailableError, KernelRegistrationError
from polykernel.ffi import abi, target_name, targets

C_PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "xla/ffi/api/c_api.h"
/* The extension header type was renamed (XLA_FFI_Extension_Base ->
   XLA_FFI_InternalExtension, at API 0.4 in jaxlib 0.11.2): take it from the field. */
typedef __typeof__(*((XLA_FFI_CallFrame*)0)->extension_start) PK_Ext;
#define P(name, expr) printf("%s %ld\n", name, (long)(expr))
#define F(m) offsetof(XLA_FFI_CallFrame, m)
#define A(m) offsetof(XLA_FFI_Api, m)
#define V(m) (offsetof(XLA_FFI_Metadata, api_version) \
              + offsetof(XLA_FFI_Api_Version, m))
int main(void) {
  return 0;
}
"""

# Each fact the probe prints: its name (a constant of polykernel.ffi.abi) and the C
# expression giving it (F(m): a field of the call frame; A(m): of the API struct;
# V(m): of the metadata's api_version).
PROBED = {
    "FRAME_STRUCT_SIZE": "XLA_FFI_CallFrame_STRUCT_SIZE",
    "FRAME_EXTENSION": "F(extension_start)",
    "FRAME_API": "F(api)",
    "FRAME_CTX": "F(ctx)",
    "FRAME_STAGE": "F(stage)",
    "FRAME_ARGS_SIZE": "F(args) + offsetof(XLA_FFI_Args, size)",
    "FRAME_ARG_TYPES": "F(args) + offsetof(XLA_FFI_Args, types)",
    "FRAME_ARGS": "F(args) + offsetof(XLA_FFI_Args, args)",
    "FRAME_RETS_SIZE": "F(rets) + offsetof(XLA_FFI_Rets, size)",
    "FRAME_RETS": "F(rets) + offsetof(XLA_FFI_Rets, rets)",
    "FRAME_ATTRS_SIZE": "F(attrs) + offsetof(XLA_FFI_Attrs, size)",
    "FRAME_ATTR_TYPES": "F(attrs) + offsetof(XLA_FFI_Attrs, types)",
    "FRAME_ATTR_NAMES": "F(attrs) + offsetof(XLA_FFI_Attrs, names)",
    "FRAME_ATTRS": "F(attrs) + offsetof(XLA_FFI_Attrs, attrs)",
    "EXT_TYPE": "offsetof(PK_Ext, type)",
    "METADATA_EXT_SIZE": "XLA_FFI_Metadata_Extension_STRUCT_SIZE",
    "METADATA_EXT_METADATA": "offsetof(XLA_FFI_Metadata_Extension, metadata)",
    "METADATA_SIZE": "XLA_FFI_Metadata_STRUCT_SIZE",
    "METADATA_VERSION": "offsetof(XLA_FFI_Metadata, api_version)",
    "METADATA_MAJOR": "V(major_version)",
    "METADATA_MINOR": "V(minor_version)",
    "METADATA_TRAITS": "offsetof(XLA_FFI_Metadata, traits)",
    "METADATA_STATE_TYPE_ID": "offsetof(XLA_FFI_Metadata, state_type_id)",
    "API_VERSION_SIZE": "XLA_FFI_Api_Version_STRUCT_SIZE",
    "BUFFER_DTYPE": "offsetof(XLA_FFI_Buffer, dtype)",
    "BUFFER_DATA": "offsetof(XLA_FFI_Buffer, data)",
    "BUFFER_RANK": "offsetof(XLA_FFI_Buffer, rank)",
    "BUFFER_DIMS": "offsetof(XLA_FFI_Buffer, dims)",
    "SCALAR_DTYPE": "offsetof(XLA_FFI_Scalar, dtype)",
    "SCALAR_VALUE": "offsetof(XLA_FFI_Scalar, value)",
    "BYTESPAN_PTR": "offsetof(XLA_FFI_ByteSpan, ptr)",
    "BYTESPAN_LEN": "offsetof(XLA_FFI_ByteSpan, len)",
    "API_STRUCT_SIZE": "XLA_FFI_Api_STRUCT_SIZE",
    "API_ERROR_CREATE": "A(XLA_FFI_Error_Create)",
    "API_ERROR_DESTROY": "A(XLA_FFI_Error_Destroy)",
    "API_STREAM_GET": "A(XLA_FFI_Stream_Get)",
    "API_THREAD_POOL_SCHEDULE": "A(XLA_FFI_ThreadPool_Schedule)",
    "API_THREAD_POOL_NUM_THREADS": "A(XLA_FFI_ThreadPool_NumThreads)",
    "ERROR_CREATE_ARGS_SIZE": "XLA_FFI_Error_Create_Args_STRUCT_SIZE",
    "ERROR_CREATE_ARGS_MESSAGE": "offsetof(XLA_FFI_Error_Create_Args, message)",
    "ERROR_CREATE_ARGS_ERRC": "offsetof(XLA_FFI_Error_Create_Args, errc)",
    # enum values (module constants, identical in every supported version)
    "STAGE_EXECUTE": "XLA_FFI_ExecutionStage_EXECUTE",
    "EXT_TYPE_METADATA": "XLA_FFI_Extension_Metadata",
    "ATTR_TYPE_SCALAR": "XLA_FFI_AttrType_SCALAR",
    "ARG_TYPE_BUFFER": "XLA_FFI_ArgType_BUFFER",
    "TRAIT_COMMAND_BUFFER_COMPATIBLE": (
        "XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE"
    ),
    "ERRC_INVALID_ARGUMENT": "XLA_FFI_Error_Code_INVALID_ARGUMENT",
    "ERRC_INTERNAL": "XLA_FFI_Error_Code_INTERNAL",
    "HEADER_MAJOR": "XLA_FFI_API_MAJOR",
    "HEADER_MINOR": "XLA_FFI_API_MINOR",
}
DTYPE_ENUMS = {
    "bool": "PRED", "int8": "S8", "int16": "S16", "int32": "S32", "int64": "S64",
    "uint8": "U8", "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "float16": "F16", "float32": "F32", "float64": "F64", "complex64": "C64",
    "bfloat16": "BF16", "complex128": "C128",
}  # fmt: skip


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs a C compiler")
def test_offsets_match_installed_jaxlib_headers(tmp_path):
    dtypes = {
        f"DTYPE_{name}": f"XLA_FFI_DataType_{e}" for name, e in DTYPE_ENUMS.items()
    }
    prints = "".join(f'  P("{k}", {v});\n' for k, v in {**PROBED, **dtypes}.items())
    src = tmp_path / "probe.c"
    src.write_text(C_PROBE.replace("  return 0;\n}", prints + "  return 0;\n}"))
    exe = tmp_path / "probe"
    inc = jax.ffi.include_dir()
    subprocess.run(["gcc", "-I", inc, str(src), "-o", str(exe)], check=True)
    lines = subprocess.check_output([str(exe)]).decode().splitlines()
    values = {k: int(v) for k, v in (ln.split() for ln in lines)}
    version = (values.pop("HEADER_MAJOR"), values.pop("HEADER_MINOR"))
    assert abi.installed_api_version() == version
    assert version in abi.SUPPORTED_VERSIONS
    assert version[0] == abi.API_MAJOR and version[1] >= abi.API_MINOR
    table = abi.layout()
    assert set(table) <= set(values)  # every layout fact is probed
    for name, value in values.items():
        if name.startswith("DTYPE_"):
            assert abi.DTYPE_CODES[name[6:]] == value, name
        else:
            assert getattr(abi, name) == value, name
    for name, code in abi.DTYPE_CODES.items():
        assert (
            abi.dtype_code(np.dtype(name) if name != "bfloat16" else jnp.bfloat16)
            == code
        )


def test_unknown_ffi_version_is_refused_with_what_to_install(tmp_path, monkeypatch):
    with pytest.raises(
        BackendUnavailableError,
        match=r"XLA FFI API 0\.9, which this polykernel does not know \(known: "
        r"0\.3 \(jaxlib 0\.10\).*install them with: pip install 'jax>=0\.10,<0\.13'",
    ):
        abi.layout_for((0, 9))
    assert abi.parse_api_version("#define XLA_FFI_API_MINOR 4") is None
    header = tmp_path / "c_api.h"
    header.write_text("#define XLA_FFI_API_MAJOR 1\n#define XLA_FFI_API_MINOR 0\n")
    monkeypatch.setattr(abi, "ffi_header", lambda: header)
    abi.installed_api_version.cache_clear()
    try:
        with pytest.raises(BackendUnavailableError, match=r"FFI API 1\.0"):
            abi.layout()
    finally:
        monkeypatch.undo()
        abi.installed_api_version.cache_clear()
    assert abi.layout()["FRAME_API"] == 16


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


def test_a_closure_over_an_unhashable_object_is_not_fingerprinted():
    # Unfingerprintable is a ValueError; it once passed for an empty closure cell,
    # so kernels closing over different cfuncs shared one name and one handler.
    def make(scale):
        @numba.cfunc("float64(float64)")
        def scaled(v):
            return scale * v

        @numba.njit
        def kernel(x, out):
            for i in range(out.size):
                out[i] = scaled(x[i])

        return kernel

    double, triple = make(2.0), make(3.0)
    with pytest.raises(Unfingerprintable, match="CFunc object"):
        kernel_fingerprint(double)
    spec = jax.ShapeDtypeStruct((3,), jnp.float32)
    ones = jnp.ones(3, jnp.float32)
    assert numba_kernel(double, spec)(ones).tolist() == [2.0] * 3
    assert numba_kernel(triple, spec)(ones).tolist() == [3.0] * 3


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
    record = targets.lookup(target, "cpu")
    same = {"platform": "cpu", "identity": record.identity, "backend": "numba"}
    assert targets.register(target, record.address, **same) is False
    with pytest.raises(KernelRegistrationError, match="already names different"):
        targets.register(target, noop.address, platform="cpu", identity="other",
                         backend="numba")  # fmt: skip


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
