"""A Numba-CUDA kernel the cache holds, in a fresh process: no compiler (issue 36).

The launcher's build cache is looked up by a content key computed without Numba's
compiler (``backends/numba_cuda/fingerprint.py``, on Numba's content fingerprint);
these tests check what the key covers (device functions and numba-cuda's
intrinsics read by content), that a held build is used without ``compile_ptx``,
and — in two new processes sharing one cache, lowering for CUDA without a GPU —
that the second one starts no process, calls no compiler, imports no compiler
package and names the same launcher kernel as the first.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32
from warm_start_support import lower_in_a_new_process

from polykernel.backends.numba_cuda import compile as nc_compile
from polykernel.backends.numba_cuda.fingerprint import build_key, kernel_digest
from polykernel.launcher.cache import Build, save_build
from polykernel.launcher.kernels import KernelImage

TABLE = np.arange(4, dtype=np.float32)
ARRAYS = (("float32",) * 3, (1, 1, 1))


@cuda.jit(device=True)
def _twice(a):
    return 2 * a + TABLE[0]


@cuda.jit
def rich(x, y, out):
    # What kernels reach: intrinsics, stub properties, shared arrays, atomics,
    # libdevice, math, a device function and a global array.
    buf = cuda.shared.array(32, float32)
    i = cuda.grid(1)
    buf[cuda.threadIdx.x] = x[i]
    cuda.syncthreads()
    cuda.atomic.add(out, 0, _twice(buf[cuda.threadIdx.x]) + math.exp(y[i]))
    out[1] = cuda.libdevice.exp(1.0) + cuda.blockDim.x


@cuda.jit
def plain(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit(fastmath=True)
def plain_fast(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


def test_kernels_reaching_numba_cuda_objects_have_a_content_key():
    key = build_key(rich, *ARRAYS, ("90",))
    assert key is not None and key == build_key(rich, *ARRAYS, ("90",))
    assert kernel_digest(rich) != kernel_digest(plain)


def test_the_key_covers_what_nvvm_compiles():
    key = build_key(plain, *ARRAYS, ("90",))
    changed = [
        build_key(plain_fast, *ARRAYS, ("90",)),  # an option (same code)
        build_key(plain, ("float64",) * 3, (1, 1, 1), ("90",)),  # dtypes
        build_key(plain, ("float32",) * 3, (2, 2, 2), ("90",)),  # ranks
        build_key(plain, *ARRAYS, ("80",)),  # the architecture
        build_key(plain, *ARRAYS, ("80", "90")),
        build_key(plain, *ARRAYS, ("90",), ("float64",)),  # a scalar parameter
    ]
    assert key not in changed and len(set(changed)) == len(changed)


def test_a_typing_extension_for_cuda_changes_the_key():
    # An @overload for the CUDA target changes what a kernel calling the function
    # compiles to, not the kernel's code: the key must see it (Numba's own
    # registry does not hold it).
    from numba.cuda.extending import overload

    before = build_key(plain, *ARRAYS, ("90",))

    def stub(x):  # typed only through its overload
        raise NotImplementedError

    @overload(stub)
    def _stub_impl(x):
        return lambda x: x + 1

    assert build_key(plain, *ARRAYS, ("90",)) not in (before, None)


def test_a_kernel_without_a_content_key_is_compiled_in_process_only():
    class Opaque:  # a user object: cannot be hashed by content
        scale = 2.0

    opaque = Opaque()

    @cuda.jit
    def reads_an_object(x, out):
        out[0] = x[0] * opaque.scale

    assert build_key(reads_an_object, ("float32",) * 2, (1, 1), ("90",)) is None


def test_a_held_build_is_used_without_the_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYKERNEL_CACHE_DIR", str(tmp_path))
    dtypes, ranks = ("float32", "float32", "float32"), (1, 1, 1)
    images = (KernelImage("ptx", "86", b".version 8.0 fake"),)
    key = build_key(plain, dtypes, ranks, ("86",))
    assert key is not None and save_build(key, Build("_Z5plain", images))

    def refuse(*args, **kw):
        raise AssertionError("compile_ptx was called on a cache hit")

    monkeypatch.setattr(cuda, "compile_ptx", refuse)
    nc_compile.kernel_images.cache_clear()
    try:
        assert nc_compile.kernel_images(plain, dtypes, ranks, ("86",)) == (
            "_Z5plain", images)  # fmt: skip
    finally:
        nc_compile.kernel_images.cache_clear()


@pytest.mark.slow  # two processes, one NVVM compile and the launcher's build
def test_a_second_process_lowers_from_the_cache_without_compiling(tmp_path, run_env):
    env = {**run_env, "POLYKERNEL_CACHE_DIR": str(tmp_path / "cache"),
           "POLYKERNEL_CUDA_ARCH": "90"}  # fmt: skip
    cold = lower_in_a_new_process("numba_cuda", env)
    warm = lower_in_a_new_process("numba_cuda", env)
    print(f"\nnumba_cuda scaled_add, lower() for cuda: cold {cold['lower_ms']:.0f} "
          f"ms, warm {warm['lower_ms']:.1f} ms")  # fmt: skip
    assert cold["compiles"] and cold["launcher"] and len(cold["kernels"]) == 1
    assert warm["compiles"] == [], "the warm process compiled the kernel again"
    assert warm["started"] == [], f"the warm process started {warm['started']}"
    assert warm["imported"] == [], f"the warm process imported {warm['imported']}"
    assert warm["kernels"] == cold["kernels"] and warm["launcher"]
