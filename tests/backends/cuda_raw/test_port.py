"""Port tests: native sources and loader calls written for the reference API.

Everything below the imports is written the way the reference documents it
(``BE::Tensor``, ``int64_t stream``, ``// @BE`` marks, ``BE_CHECK``,
``BE_DISPATCH_*``, ``brainevent/common.h``, the loaders' keyword arguments) and
runs unchanged: C++ compiles and runs on the CPU here, CUDA compiles and links
for sm_80 here and launches under ``make test-gpu``.
"""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import polykernel as pk
from polykernel import (
    CompilationError,
    KernelCompilationError,
    list_registered_targets,
    load_cpp_file,
    load_cpp_inline,
    load_cuda_dir,
    load_cuda_file,
    load_cuda_inline,
)

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")

CPP_SRC = r"""
#include "brainevent/common.h"

// @BE axpy
void axpy(const BE::Tensor x, const BE::Tensor y, BE::Tensor out, float alpha) {
  BE_CHECK(x.ndim() == 1) << "expected a vector, got rank " << x.ndim();
  BE_CHECK(x.size(0) == y.shape(0)) << "length mismatch";
  BE_DISPATCH_FLOATING(x.dtype(), scalar_t, {
    const scalar_t* a = static_cast<const scalar_t*>(x.data_ptr());
    const scalar_t* b = y.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = alpha * a[i] + b[i];
  });
}

// @BE describe
void describe(const BE::Tensor x, BE::Tensor info) {
  int64_t* o = info.data_ptr<int64_t>();
  o[0] = x.ndim();
  o[1] = x.stride(0);
  o[2] = static_cast<int64_t>(x.nbytes());
  o[3] = static_cast<int64_t>(x.element_size());
  o[4] = x.dtype() == BE::DType::Float32 ? 1 : 0;
  o[5] = x.is_contiguous() ? 1 : 0;
}
"""


def _f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


def test_reference_cpp_source_runs_unchanged_with_functions_discovered():
    mod = load_cpp_inline(
        name="port_cpp_axpy",
        cpp_sources=CPP_SRC,
        extra_cflags=["-DPORT_UNUSED=1"],
        force_rebuild=True,
    )
    assert mod.axpy.spec.tokens() == ["arg", "arg", "ret", "attr.alpha:float32"]
    assert mod.describe.spec.tokens() == ["arg", "ret"]
    x = jnp.arange(4.0, dtype=jnp.float32)
    y = jnp.ones(4, jnp.float32)
    # Called the reference's way: the documented target name, by hand.
    out = jax.ffi.ffi_call("port_cpp_axpy.axpy", _f32(4))(x, y, alpha=np.float32(2))
    np.testing.assert_allclose(out, 2 * np.arange(4.0) + 1)
    info = mod.describe(
        jnp.zeros((2, 3), jnp.float32), outs=jax.ShapeDtypeStruct((6,), jnp.int64)
    )
    assert info.tolist() == [2, 3, 24, 4, 1, 1]


def test_be_check_and_dispatch_raise_instead_of_aborting():
    mod = load_cpp_inline("port_cpp_checks", CPP_SRC)
    m = jnp.zeros((2, 2), jnp.float32)
    with pytest.raises(Exception, match=r"BE_CHECK\(x.ndim\(\) == 1\) failed .*rank 2"):
        mod.axpy(m, m, outs=_f32(2, 2), alpha=1.0)
    i = jnp.zeros(3, jnp.int32)
    with pytest.raises(
        Exception, match="BE_DISPATCH_FLOATING: unsupported dtype int32"
    ):
        mod.axpy(i, i, outs=jax.ShapeDtypeStruct((3,), jnp.int32), alpha=1.0)
    # The process is fine afterwards.
    x = jnp.ones(2, jnp.float32)
    assert mod.axpy(x, x, outs=_f32(2), alpha=1.0).tolist() == [2.0, 2.0]


def test_inline_spec_list_form_and_macro_generated_functions():
    src = r"""
    #define SCALE_FN(SUFFIX, FACTOR)                                   \
    void scale##SUFFIX(const BE::Tensor x, BE::Tensor out) {          \
      const float* a = x.data_ptr<float>();                            \
      float* o = out.data_ptr<float>();                                \
      for (int64_t i = 0; i < x.numel(); ++i) o[i] = FACTOR * a[i];    \
    }

    // @BE scale_by2
    SCALE_FN(_by2, 2.0f)

    // @pk scale_by3 args rets
    SCALE_FN(_by3, 3.0f)
    """
    mod = load_cpp_inline("port_cpp_macro", src)
    x = jnp.arange(3.0, dtype=jnp.float32)
    assert mod.scale_by2(x, outs=_f32(3)).tolist() == [0.0, 2.0, 4.0]
    assert mod.scale_by3(x, outs=_f32(3)).tolist() == [0.0, 3.0, 6.0]
    # The list form infers from the (macro) signature too.
    listed = load_cpp_inline("port_cpp_macro_list", src, ["scale_by2"])
    assert list(listed.functions) == ["scale_by2"]


def test_loader_signatures_match_the_reference():
    def keywords(fn):
        return [
            (n, p.default)
            for n, p in inspect.signature(fn).parameters.items()
            if p.kind is p.KEYWORD_ONLY
        ]

    cpp = inspect.signature(load_cpp_inline).parameters
    assert list(cpp)[:3] == ["name", "cpp_sources", "functions"]
    assert cpp["functions"].default is None
    assert keywords(load_cpp_inline)[:9] == [
        ("extra_cflags", None),
        ("extra_ldflags", None),
        ("extra_include_paths", None),
        ("build_directory", None),
        ("verbose", False),
        ("force_rebuild", False),
        ("replace", False),
        ("auto_register", True),
        ("target_prefix", None),
    ]
    cuda = inspect.signature(load_cuda_inline).parameters
    assert list(cuda)[:3] == ["name", "cuda_sources", "functions"]
    assert [k for k, _ in keywords(load_cuda_inline)][:13] == [
        "extra_cuda_cflags",
        "extra_ldflags",
        "extra_include_paths",
        "build_directory",
        "verbose",
        "compute_capability",
        "force_rebuild",
        "replace",
        "auto_register",
        "target_prefix",
        "optimization_level",
        "use_fast_math",
        "allow_cuda_graph",
    ]
    kw = dict(keywords(load_cuda_inline))
    assert kw["optimization_level"] == 3 and kw["allow_cuda_graph"] is True
    assert kw["use_fast_math"] is False and kw["compute_capability"] is None
    for fn in (load_cpp_file, load_cuda_file, load_cuda_dir):
        params = inspect.signature(fn).parameters
        assert list(params)[1] == "functions" and params["functions"].default is None
        assert params["name"].default is None


def test_file_loader_with_reference_keywords(tmp_path, capsys):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "factor.h").write_text("#define FACTOR 5.0f\n")
    (tmp_path / "src").mkdir()
    src = tmp_path / "src" / "port_file_kernels.cpp"
    src.write_text(
        '#include "factor.h"\n'
        "// @BE times\n"
        "void times(const BE::Tensor x, BE::Tensor out) {\n"
        "  for (int64_t i = 0; i < x.numel(); ++i)\n"
        "    out.data_ptr<float>()[i] = FACTOR * x.data_ptr<float>()[i];\n"
        "}\n"
    )
    build = tmp_path / "build"
    mod = load_cpp_file(
        src,
        extra_include_paths=[str(tmp_path / "inc")],
        build_directory=str(build),
        verbose=True,
        target_prefix="port_prefixed",
    )
    printed = capsys.readouterr().out
    assert "port_file_kernels" in printed and str(tmp_path / "inc") in printed
    assert (build / "port_file_kernels.so").is_file()  # the caller's files stay
    assert (build / "port_file_kernels.cpp").is_file()
    assert Path(mod.library).is_file() and not Path(mod.library).is_relative_to(build)
    assert "port_prefixed.times" in list_registered_targets()
    out = jax.ffi.ffi_call("port_prefixed.times", _f32(2))(jnp.ones(2, jnp.float32))
    assert out.tolist() == [5.0, 5.0]
    again = load_cpp_file(
        src,
        extra_include_paths=[str(tmp_path / "inc")],
        verbose=True,
        target_prefix="port_prefixed",
    )
    assert again is mod
    assert "'port_file_kernels': already loaded" in capsys.readouterr().out


def test_auto_register_false_keeps_the_raw_name_free():
    src = "void ident(const BE::Tensor x, BE::Tensor y) {}\n"
    mod = load_cpp_inline("port_noreg", src, ["ident"], auto_register=False)
    assert "port_noreg.ident" not in list_registered_targets()
    assert mod.target("ident") in list_registered_targets()
    # Registering it later, the reference's way, makes the raw name callable.
    pk.register_ffi_target("port_noreg.ident", mod, "ident", platform="cpu")
    assert "port_noreg.ident" in list_registered_targets()


def test_a_reload_with_edited_source_repoints_the_raw_name():
    first = "void rv(const BE::Tensor x, BE::Tensor y) { y.data_ptr<float>()[0] = 1; }"
    load_cpp_inline("port_replace", first, ["rv"])
    raw = jax.jit(lambda a: jax.ffi.ffi_call("port_replace.rv", _f32(1))(a))
    assert raw(jnp.zeros(1, jnp.float32)).tolist() == [1.0]
    load_cpp_inline("port_replace", first.replace("= 1", "= 2"), ["rv"])
    assert raw(jnp.zeros(1, jnp.float32)).tolist() == [2.0]
    mod = load_cpp_inline(
        "port_replace", first.replace("= 1", "= 3"), ["rv"], replace=True
    )
    assert mod.rv(jnp.zeros(1, jnp.float32), outs=_f32(1)).tolist() == [3.0]
    assert raw(jnp.zeros(1, jnp.float32)).tolist() == [3.0]
    load_cpp_inline("port_replace", first, ["rv"])  # in-process hit: latest again
    assert raw(jnp.zeros(1, jnp.float32)).tolist() == [1.0]


def test_compiler_failures_use_the_reference_classes():
    with pytest.raises(KernelCompilationError) as info:
        load_cpp_inline(
            "port_syntax", "void f(const BE::Tensor x, BE::Tensor y) { oops }", ["f"]
        )
    assert isinstance(info.value, CompilationError) and info.value.stage == "compile"
    assert "oops" in info.value.compiler_output
    link = "void gone();\nvoid g(const BE::Tensor x, BE::Tensor y) { gone(); }"
    with pytest.raises(CompilationError) as info:
        load_cpp_inline("port_link", link, ["g"], extra_ldflags=["-Wl,--no-undefined"])
    assert info.value.stage == "link"


CUDA_SRC = r"""
#include <cuda_runtime.h>
#include "brainevent/common.h"

template <typename T>
__global__ void add_k(const T* a, const T* b, T* o, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) o[i] = a[i] + b[i];
}

// @BE vector_add
void vector_add(const BE::Tensor a, const BE::Tensor b, BE::Tensor out,
                int64_t stream) {
  int64_t n = a.numel();
  BE_DISPATCH_FLOATING(a.dtype(), scalar_t, {
    add_k<scalar_t><<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(
        static_cast<const scalar_t*>(a.data_ptr()), b.data_ptr<scalar_t>(),
        out.data_ptr<scalar_t>(), n);
  });
  BE_CHECK_KERNEL_LAUNCH();
}

// @BE half_add arg arg ret stream
void half_add(const BE::Tensor a, const BE::Tensor b, BE::Tensor out,
              int64_t stream) {
  int64_t n = a.numel();
  BE_DISPATCH_FLOATING_AND_HALF(a.dtype(), scalar_t, {
    add_k<scalar_t><<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(
        a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n);
  });
  BE_CUDA_CHECK(cudaGetLastError());
}
"""


def _cuda(name, **kwargs):
    return load_cuda_inline(
        name=name, cuda_sources=CUDA_SRC, compute_capability="sm_80", **kwargs
    )


@pytest.mark.slow
@needs_nvcc
def test_reference_cuda_source_compiles_and_links_for_sm80():
    mod = _cuda("port_cuda_vadd", optimization_level=2, use_fast_math=True)
    assert mod.platform == "cuda"
    assert mod.vector_add.spec.tokens() == ["arg", "arg", "ret", "stream"]
    assert mod.half_add.spec.tokens() == ["arg", "arg", "ret", "stream"]
    command = json.loads((Path(mod.library).parent / "meta.json").read_text())[
        "command"
    ]
    assert "-O2" in command and "--use_fast_math" in command
    assert "arch=compute_80,code=sm_80" in command
    assert hasattr(mod._handle, "polykernel_ffi_vector_add")


@pytest.mark.slow
@needs_nvcc
def test_load_cuda_dir_discovers_marked_functions(tmp_path):
    (tmp_path / "vadd.cu").write_text(CUDA_SRC)
    mod = load_cuda_dir(tmp_path, name="port_cuda_dir", compute_capability="sm_80")
    assert list(mod.functions) == ["vector_add", "half_add"]


@pytest.mark.slow
@needs_nvcc
def test_unsupported_architecture_is_an_unsupported_arch_error():
    with pytest.raises(pk.UnsupportedArchError, match="does not support the requested"):
        load_cuda_inline("port_cuda_sm10", CUDA_SRC, compute_capability="sm_10")


@pytest.mark.gpu
def test_reference_cuda_source_launches():
    _cuda("port_cuda_vadd_gpu")
    gpu = jax.devices("gpu")[0]  # the raw form runs where its operands live
    a = jnp.ones(512, jnp.float32, device=gpu)
    b = jnp.full(512, 2.0, jnp.float32, device=gpu)
    out = jax.ffi.ffi_call(
        "port_cuda_vadd_gpu.vector_add", jax.ShapeDtypeStruct((512,), jnp.float32)
    )(a, b)
    np.testing.assert_allclose(np.asarray(out), np.full(512, 3.0), rtol=1e-6)
    half = jnp.ones(256, jnp.float16, device=gpu)
    out = jax.ffi.ffi_call(
        "port_cuda_vadd_gpu.half_add", jax.ShapeDtypeStruct((256,), jnp.float16)
    )(half, half)
    np.testing.assert_allclose(np.asarray(out, np.float32), np.full(256, 2.0))
