"""CUDA modules: nvcc builds and registers them without a GPU; launches need one."""

from __future__ import annotations

import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from polykernel.native import CompileOptions, load_cuda_inline

CUDA_SRC = r"""
__global__ void axpb_kernel(const float* x, float* y, float a, float b, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

void axpb(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream, float a, float b) {
  int64_t n = x.numel();
  int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  axpb_kernel<<<blocks, threads, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(),
                                              a, b, n);
  cudaError_t err = cudaGetLastError();
  PK_CHECK(err == cudaSuccess, "launch failed: " << cudaGetErrorString(err));
}
"""

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")


def _load(arch):
    return load_cuda_inline(
        "test_cuda_axpb", CUDA_SRC, ["axpb"], options=CompileOptions(cuda_arch=arch)
    )


@pytest.mark.slow
@needs_nvcc
def test_cuda_module_compiles_links_and_registers_for_explicit_arch():
    mod = _load(["sm_80"])
    assert mod.platform == "cuda"
    assert mod.axpb.spec.tokens() == [
        "arg",
        "ret",
        "stream",
        "attr.a:float32",
        "attr.b:float32",
    ]
    meta_cmd = (Path(mod.library).parent / "meta.json").read_text()
    assert "arch=compute_80,code=sm_80" in meta_cmd and "-O3" in meta_cmd
    # The exported handler exists in the shared library.
    assert hasattr(mod._handle, "polykernel_ffi_axpb")


@pytest.mark.gpu
def test_cuda_kernel_launch_on_gpu():
    mod = load_cuda_inline("test_cuda_axpb_gpu", CUDA_SRC, ["axpb"])
    x = jnp.arange(1000, dtype=jnp.float32, device=jax.devices("gpu")[0])
    y = jax.jit(
        lambda v: mod.axpb(v, outs=jax.ShapeDtypeStruct(v.shape, v.dtype), a=2.0, b=1.0)
    )(x)
    np.testing.assert_allclose(np.asarray(y), 2 * np.arange(1000) + 1)
