"""CUDA modules: nvcc builds and registers them without a GPU; launches need one.

Every GPU path has a compile-only test that runs here (nvcc, registration, the
handler's metadata answer) and a ``gpu``-marked launch twin that runs under
``make test-gpu``; the launch twins ran on an H200 (see docs/gpu.md).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from polykernel import CompileOptions, load_cuda_inline
from polykernel.ffi import abi
from polykernel.ffi.metadata import query_metadata

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


def _load(arch, name="test_cuda_axpb", **kwargs):
    return load_cuda_inline(
        name, CUDA_SRC, ["axpb"], options=CompileOptions(cuda_arch=arch), **kwargs
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


@pytest.mark.slow
@needs_nvcc
def test_cuda_handlers_are_cuda_graph_ready_unless_opted_out():
    meta = query_metadata(_load(["sm_80"]).axpb.handler_address)
    assert meta.api_version == (abi.API_MAJOR, abi.API_MINOR)
    assert meta.command_buffer_compatible and meta.traits == 1
    opted_out = _load(["sm_80"], "test_cuda_axpb_nograph", allow_cuda_graph=False)
    assert query_metadata(opted_out.axpb.handler_address).traits == 0
    assert opted_out.key != _load(["sm_80"]).key  # the trait is part of the build


@pytest.mark.gpu
def test_cuda_kernel_launch_on_gpu():
    mod = load_cuda_inline("test_cuda_axpb_gpu", CUDA_SRC, ["axpb"])
    x = jnp.arange(1000, dtype=jnp.float32, device=jax.devices("gpu")[0])
    y = jax.jit(
        lambda v: mod.axpb(v, outs=jax.ShapeDtypeStruct(v.shape, v.dtype), a=2.0, b=1.0)
    )(x)
    np.testing.assert_allclose(np.asarray(y), 2 * np.arange(1000) + 1)


@pytest.mark.gpu
def test_cuda_chain_in_one_jit_on_gpu():
    # Command-buffer compatible: XLA may replay the loop body as a CUDA graph.
    mod = load_cuda_inline("test_cuda_axpb_gpu", CUDA_SRC, ["axpb"])
    x = jnp.zeros(1000, jnp.float32, device=jax.devices("gpu")[0])
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    chain = jax.jit(
        lambda v: jax.lax.fori_loop(
            0, 50, lambda i, u: mod.axpb(u, outs=spec, a=1.0, b=1.0), v
        )
    )
    np.testing.assert_allclose(np.asarray(chain(x)), 50.0)


@pytest.mark.gpu
def test_cuda_launch_without_cuda_graph_on_gpu():
    mod = load_cuda_inline(
        "test_cuda_axpb_gpu_nograph", CUDA_SRC, ["axpb"], allow_cuda_graph=False
    )
    x = jnp.arange(10, dtype=jnp.float32, device=jax.devices("gpu")[0])
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    y = jax.jit(lambda v: mod.axpb(v, outs=spec, a=3.0, b=0.0))(x)
    np.testing.assert_allclose(np.asarray(y), 3 * np.arange(10))


@pytest.mark.gpu
def test_cuda_host_error_becomes_python_error_on_gpu():
    src = (
        CUDA_SRC
        + """
void refuse(const pk::Tensor& x, pk::Tensor& y, cudaStream_t stream) {
  PK_CHECK(x.numel() < 4, "too many: " << x.numel());
}"""
    )
    mod = load_cuda_inline("test_cuda_refuse_gpu", src, ["refuse"])
    x = jnp.ones(8, jnp.float32, device=jax.devices("gpu")[0])
    with pytest.raises(
        jax.errors.JaxRuntimeError, match=r"refuse: PK_CHECK.*too many: 8"
    ):
        jax.block_until_ready(mod.refuse(x, outs=jax.ShapeDtypeStruct((8,), x.dtype)))


def test_gpu_run_without_a_gpu_fails_instead_of_skipping(run_env):
    # `make test-gpu` (POLYKERNEL_TEST_GPU=1) must never pass by skipping every
    # gpu test; plain `make test` keeps JAX on the CPU.
    if jax.default_backend() != "cpu" or os.environ.get("POLYKERNEL_TEST_GPU") == "1":
        pytest.skip("this run can see a GPU")
    env = {**run_env, "POLYKERNEL_TEST_GPU": "1", "JAX_PLATFORMS": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__,
         "-k", "explicit_arch"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "make test-gpu: JAX sees no GPU" in proc.stdout + proc.stderr
    assert run_env["JAX_PLATFORMS"] == "cpu"
