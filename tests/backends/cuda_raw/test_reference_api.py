"""The reference API's native-side names, with real compilers and real XLA FFI.

load_cuda_dir, set/get_cache_dir, clear_cache, print_diagnostics, CompiledModule,
register_ffi_target, list_registered_targets, normalize_tokens, so_ext and the
compiler backends. Code below the import line is written as for the reference.
"""

from __future__ import annotations

import ctypes
import hashlib
import io
import itertools
import os
import shutil
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel import (
    CompiledModule,
    CompileOptions,
    CPPBackend,
    CUDABackend,
    HIPBackend,
    clear_cache,
    config as pk_config,
    get_cache_dir,
    list_registered_targets,
    load_cpp_inline,
    load_cuda_dir,
    normalize_tokens,
    print_diagnostics,
    register_ffi_target,
    set_cache_dir,
    so_ext,
)

_ids = itertools.count()
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")

TWICE = r"""
void twice(const pk::Tensor& x, pk::Tensor& y) {
  const float* a = x.data_ptr<float>();
  float* b = y.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = 2 * a[i];
}
"""
THRICE = TWICE.replace("twice", "thrice").replace("2 * a[i]", "3 * a[i]")


def unique(prefix):
    return f"{prefix}_{os.getpid()}_{next(_ids)}"


@pytest.fixture
def private_cache(tmp_path):
    """A fresh cache root set with set_cache_dir, restored afterwards."""
    assert pk_config.cache_root() == Path(os.environ["POLYKERNEL_CACHE_DIR"])
    root = tmp_path / "cache"
    set_cache_dir(root)
    yield root
    set_cache_dir(None)
    assert pk_config.cache_root() == Path(os.environ["POLYKERNEL_CACHE_DIR"])


# -- small pure helpers --------------------------------------------------------------
def test_so_ext_is_this_os_suffix():
    assert so_ext() == {"linux": ".so", "darwin": ".dylib", "win32": ".dll"}.get(
        "linux" if sys.platform.startswith("linux") else sys.platform
    )


def test_normalize_tokens_maps_the_reference_aliases():
    tokens = ["args", "rets", "ctx.stream", "attrs.alpha", "attrs.n:int64"]
    assert normalize_tokens(tokens) == [
        "arg",
        "ret",
        "stream",
        "attr.alpha",
        "attr.n:int64",
    ]
    kept = ["arg", "ret:float32[1]", "attr.a:float32", "stream", 3, "attrs.1-x"]
    assert normalize_tokens(kept) == kept
    assert normalize_tokens("args") == ["arg"]


# -- cache directory -----------------------------------------------------------------
@pytest.mark.slow
def test_set_cache_dir_moves_builds_and_clear_cache_counts_them(private_cache):
    assert get_cache_dir() == str(private_cache)
    assert private_cache.is_dir()
    assert (private_cache.stat().st_mode & 0o077) == 0
    first, second = unique("refcache_a"), unique("refcache_b")
    mod = load_cpp_inline(first, TWICE, ["twice"])
    load_cpp_inline(second, THRICE, ["thrice"])
    assert Path(mod.path).is_relative_to(private_cache / "native")
    assert clear_cache("no_such_module") == 0
    assert clear_cache(first) == 1
    assert not Path(mod.path).exists()
    x = jnp.arange(3, dtype=jnp.float32)  # a loaded module keeps working
    np.testing.assert_allclose(
        mod.twice(x, outs=jax.ShapeDtypeStruct((3,), x.dtype)), 2 * x
    )
    assert clear_cache() == 1
    assert clear_cache() == 0


def test_cache_dir_errors(tmp_path):
    before = get_cache_dir()
    with pytest.raises(
        TypeError, match=r"path must be a str, os.PathLike or None \(got int"
    ):
        set_cache_dir(3)
    with pytest.raises(ValueError, match="path is empty"):
        set_cache_dir("")
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(pk.CacheError, match="writable by group or others"):
        set_cache_dir(shared)
    assert get_cache_dir() == before
    with pytest.raises(TypeError, match="name must be a module name"):
        clear_cache(3)


# -- CompiledModule, register_ffi_target, list_registered_targets --------------------
@pytest.fixture(scope="module")
def twice_module():
    return load_cpp_inline(unique("reftwice"), TWICE, ["twice"])


def test_loaded_module_is_a_compiled_module(twice_module):
    mod = twice_module
    assert isinstance(mod, CompiledModule)
    assert mod.path.endswith(so_ext()) and Path(mod.path).is_file()
    digest = hashlib.sha256(Path(mod.path).read_bytes()).hexdigest()
    assert mod.content_hash == f"sha256:{digest[:16]}"
    assert mod.function_names == ["twice"]
    assert isinstance(mod.get_handler("twice"), ctypes._CFuncPtr)
    for caught in (KeyError, pk.KernelError):
        with pytest.raises(caught, match=r"has no function 'nope'; it exports \['tw"):
            mod.get_handler("nope")


def test_manual_registration_is_callable_from_jax(twice_module):
    # The reference way: CompiledModule(so_path, names) + register_ffi_target.
    module = CompiledModule(twice_module.path, ["twice"])
    target = unique("refapi") + ".twice"
    register_ffi_target(target, module, "twice", platform="cpu")
    register_ffi_target(target, module, "twice", platform="cpu")  # idempotent
    x = jnp.arange(4, dtype=jnp.float32)
    call = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))
    np.testing.assert_allclose(jax.jit(call)(x), 2 * x)
    targets = list_registered_targets()
    assert target in targets
    assert f"{twice_module.name}.twice" in targets  # registered by load_cpp_inline
    assert twice_module.target("twice") in targets
    assert targets == sorted(targets)


@pytest.mark.slow
def test_different_content_under_a_taken_name_is_refused(twice_module):
    triple = THRICE.replace("thrice", "twice")  # same function name, other code
    other = load_cpp_inline(unique("refthrice"), triple, ["twice"])
    target = unique("refclash") + ".f"
    register_ffi_target(target, twice_module, "twice", platform="cpu")
    for replace in (False, True):
        with pytest.raises(
            pk.KernelRegistrationError, match="already names different content"
        ):
            register_ffi_target(target, other, "twice", platform="cpu", replace=replace)
    # A name load_cpp_inline registered is protected the same way.
    with pytest.raises(ValueError, match="already names different content"):
        register_ffi_target(
            f"{twice_module.name}.twice", other, "twice", platform="cpu"
        )
    # The same content under the loader's own name is a no-op.
    register_ffi_target(
        f"{twice_module.name}.twice", twice_module, "twice", platform="cpu"
    )


def test_register_ffi_target_argument_errors(twice_module):
    with pytest.raises(TypeError, match="target_name and func_name must be strings"):
        register_ffi_target(None, twice_module, "twice", platform="cpu")
    with pytest.raises(ValueError, match="target_name is empty"):
        register_ffi_target("", twice_module, "twice", platform="cpu")
    with pytest.raises(TypeError, match=r"platform must be a string .* \(got int"):
        register_ffi_target("x.y", twice_module, "twice", platform=0)
    with pytest.raises(ValueError, match=r"unknown platform 'tpu'; expected 'CUDA'"):
        register_ffi_target("x.y", twice_module, "twice", platform="tpu")
    with pytest.raises(TypeError, match="module must be a CompiledModule"):
        register_ffi_target("x.y", "lib.so", "twice", platform="cpu")
    with pytest.raises(KeyError, match="has no function 'nope'"):
        register_ffi_target("x.y", twice_module, "nope", platform="cpu")
    assert "x.y" not in list_registered_targets()


def test_compiled_module_load_errors(tmp_path, twice_module):
    with pytest.raises(pk.KernelLoadError, match="does not exist"):
        CompiledModule(tmp_path / "missing.so", ["f"])
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"not a library")
    with pytest.raises(OSError, match="cannot load"):
        CompiledModule(junk, ["f"])
    with pytest.raises(
        pk.KernelLoadError, match=r"exports no FFI handler for 'ghost' \(tried poly"
    ):
        CompiledModule(twice_module.path, ["ghost"])


# -- compiler backends ---------------------------------------------------------------
@pytest.mark.slow
def test_cpp_backend_builds_a_shared_library(tmp_path):
    source = 'extern "C" int answer(void) { return 42; }\n'
    out = tmp_path / "out" / f"answer{so_ext()}"
    path = CPPBackend().compile_source(source, str(out), str(tmp_path / "build"))
    assert path == str(out) and out.is_file()
    assert ctypes.CDLL(path).answer() == 42
    assert (tmp_path / "build" / "kernel.cpp").read_text() == source
    with pytest.raises(pk.CompilationError, match="compilation failed") as info:
        CPPBackend().compile_source("int broken(", str(out), str(tmp_path / "b2"))
    assert "error" in info.value.compiler_output


def test_cpp_backend_argument_errors(tmp_path):
    backend = CPPBackend()
    assert repr(backend) == "CPPBackend(platform='cpu')"
    with pytest.raises(ValueError, match="optimization_level must be 0, 1, 2 or 3"):
        backend.compile_source("", "x.so", str(tmp_path), optimization_level=7)
    with pytest.raises(
        TypeError, match=r"unknown keyword argument\(s\) \['gpu_arch'\]"
    ):
        backend.compile_source("", "x.so", str(tmp_path), gpu_arch="sm_80")


def test_hip_backend_is_not_implemented(tmp_path):
    with pytest.raises(NotImplementedError, match="cannot compile HIP"):
        HIPBackend().compile_source("", str(tmp_path / "x.so"), str(tmp_path))
    assert HIPBackend.platform_name == "hip"


@pytest.mark.slow
@needs_nvcc
def test_cuda_backend_builds_for_an_explicit_arch(tmp_path):
    source = "__global__ void k(float* x) { x[threadIdx.x] += 1.0f; }\n"
    out = tmp_path / f"k{so_ext()}"
    path = CUDABackend().compile_source(
        source, str(out), str(tmp_path), gpu_arch="sm_80"
    )
    assert Path(path).is_file()
    with pytest.raises(pk.UnsupportedArchError, match="is not understood"):
        CUDABackend().compile_source(source, str(out), str(tmp_path), gpu_arch="sm_x")


# -- load_cuda_dir -------------------------------------------------------------------
CUDA_FILES = {
    "common.cuh": "__device__ inline float plus(float a, float b) { return a + b; }\n",
    "a_scale.cu": r"""
#include "common.cuh"
__global__ void scale_kernel(const float* x, float* y, float a, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = plus(a * x[i], 0.0f);
}
void scale(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream, float a) {
  int64_t n = x.numel();
  scale_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(),
                                                    y.data_ptr<float>(), a, n);
}
""",
    "b_shift.cu": r"""
__global__ void shift_kernel(const float* x, float* y, float b, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = plus(x[i], b);
}
void shift(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream, float b) {
  int64_t n = x.numel();
  shift_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x.data_ptr<float>(),
                                                    y.data_ptr<float>(), b, n);
}
""",
    "notes.txt": "not a source file",
}


@pytest.mark.slow
@needs_nvcc
def test_load_cuda_dir_compiles_every_cu_file_into_one_module(tmp_path):
    kernels = tmp_path / unique("refdir")
    kernels.mkdir()
    for name, text in CUDA_FILES.items():
        (kernels / name).write_text(text)
    mod = load_cuda_dir(
        kernels, ["scale", "shift"], options=CompileOptions(cuda_arch=["sm_80"])
    )
    assert mod.name == kernels.name and mod.platform == "cuda"
    assert sorted(mod.function_names) == ["scale", "shift"]
    assert mod.scale.spec.tokens() == ["arg", "ret", "stream", "attr.a:float32"]
    targets = list_registered_targets()
    assert f"{kernels.name}.scale" in targets and f"{kernels.name}.shift" in targets
    source = (Path(mod.path).parent / "source.cu").read_text()
    assert source.index("a_scale.cu") < source.index("b_shift.cu")
    assert "not a source file" not in source


def test_load_cuda_dir_without_sources_is_reported(tmp_path):
    (tmp_path / "readme.txt").write_text("nothing to compile")
    for caught in (pk.KernelSourceNotFoundError, pk.KernelError, FileNotFoundError):
        with pytest.raises(caught, match=r"no file in '.*' matches \['\*\.cu'\]"):
            load_cuda_dir(tmp_path, ["f"])
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        load_cuda_dir(tmp_path / "missing", ["f"])
    with pytest.raises(TypeError, match="file_patterns must be a list of glob"):
        load_cuda_dir(tmp_path, ["f"], file_patterns="*.cu")
    (tmp_path / "k.cu").write_text("void f() {}\n")
    with pytest.raises(TypeError, match=r"options must be a CompileOptions \(got dict"):
        load_cuda_dir(tmp_path, ["f"], options={"cuda_arch": ["sm_80"]})


def test_toolchain_errors_have_the_reference_classes(monkeypatch):
    from polykernel.native import toolchain

    with pytest.raises(pk.NvccNotFoundError, match="nvcc not found"):
        toolchain.find_nvcc("/no/such/nvcc")
    with pytest.raises(pk.HostCompilerNotFoundError, match="no C\\+\\+ compiler found"):
        toolchain.find_host_compiler("/no/such/g++")
    for bad in ("sm_x", "", "1"):
        with pytest.raises(pk.UnsupportedArchError, match="is not understood"):
            toolchain.normalize_arch(bad)
    monkeypatch.delenv(toolchain.ARCH_ENV, raising=False)
    detected = toolchain._detect_gpu_arches()
    if detected:  # a machine with a GPU detects its architectures
        assert toolchain.cuda_arches(None) == detected
    else:
        with pytest.raises(pk.GpuArchDetectionError, match="no CUDA GPU is visible"):
            toolchain.cuda_arches(None)
    assert issubclass(pk.GpuArchDetectionError, pk.ToolchainError)


# -- diagnostics and config knobs ----------------------------------------------------
def test_print_diagnostics_reports_toolchain_cache_and_targets(twice_module, capsys):
    buffer = io.StringIO()
    print_diagnostics(file=buffer)
    text = buffer.getvalue()
    for key in ("polykernel", "jaxlib", "ffi_api", "cxx", "nvcc", "cuda_arch", "cache"):
        assert f"\n{key} " in "\n" + text
    assert f"  - {twice_module.name}.twice" in text
    assert get_cache_dir() in text
    print_diagnostics()
    assert capsys.readouterr().out == text


def test_compute_capability_pin_reaches_the_toolchain():
    from polykernel.native.toolchain import cuda_arches

    try:
        pk.config.set_compute_capability("8.6, compute_90")
        assert pk.config.get_compute_capability() == ["sm_86", "sm_90"]
        assert cuda_arches(None) == ("86", "90")
        assert cuda_arches(("sm_75",)) == ("75",)  # an explicit option still wins
        with pytest.raises(ValueError, match="'sm_q' is not understood"):
            pk.config.set_compute_capability(["8.0", "sm_q"])
        assert pk.config.get_compute_capability() == ["sm_86", "sm_90"]
    finally:
        pk.config.set_compute_capability(None)
    assert pk.config.get_compute_capability() is None


def test_numba_parallel_flag():
    try:
        pk.set_numba_parallel(True, num_threads=1)
        assert pk.config.get_numba_parallel() is True
        assert pk.get_numba_num_threads() == 1
        with pytest.raises(TypeError, match=r"parallel must be True or False"):
            pk.set_numba_parallel("yes")
        with pytest.raises(ValueError, match=r"num_threads must be >= 1 \(got 0\)"):
            pk.set_numba_parallel(True, num_threads=0)
        with pytest.raises(TypeError, match=r"num_threads must be an int or None"):
            pk.set_numba_parallel(True, num_threads=2.0)
    finally:
        import numba

        pk.set_numba_parallel(False)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert pk.get_numba_parallel() is False and pk.get_numba_num_threads() is None
