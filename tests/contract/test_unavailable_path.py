"""A GPU path this process cannot build never fails a CPU call.

Where JAX sees a GPU, a kernel called on its own is traced for both platforms and
the data's device picks one at lowering. Here (no GPU) the GPU is made "visible" to
the contract and the GPU path made unbuildable, as Triton's is under
``TRITON_INTERPRET=1`` on a GPU machine: CPU calls (eager, jit, vmap) still run, and
lowering for CUDA raises the build error itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cuda_kernels import double

import polykernel as pk
from polykernel.backends.numba_cuda.kernel import NumbaCudaKernel
from polykernel.errors import KernelCompilationError
from polykernel.platforms import Platform

N = 32
F32 = jnp.float32


@pytest.fixture
def unbuildable_gpu_path(monkeypatch):
    emit = NumbaCudaKernel.emit

    def refusing(self, platform, arrays, scalars, outs):
        if platform == Platform.GPU:
            raise KernelCompilationError("double: no GPU compiler in this process")
        return emit(self, platform, arrays, scalars, outs)

    monkeypatch.setattr(NumbaCudaKernel, "emit", refusing)
    monkeypatch.setattr("polykernel.contract.kernel.gpu_visible", lambda: True)


def test_cpu_calls_run_and_a_cuda_lowering_raises_the_build_error(
    unbuildable_gpu_path,
):
    f = pk.numba_cuda_kernel(double, jax.ShapeDtypeStruct((N,), F32), launch_dims=N)
    x = jnp.arange(N, dtype=F32)
    np.testing.assert_array_equal(f(x), 2 * np.asarray(x))
    np.testing.assert_array_equal(jax.jit(f)(x), 2 * np.asarray(x))
    xs = jnp.stack([x, x + 1])
    np.testing.assert_array_equal(jax.vmap(f)(xs), 2 * np.asarray(xs))
    with pytest.raises(KernelCompilationError, match="no GPU compiler in this process"):
        jax.export.export(jax.jit(f), platforms=["cuda"])(x)


def test_errors_of_the_cpu_path_are_not_deferred(unbuildable_gpu_path, monkeypatch):
    def broken(self, platform, arrays, scalars, outs):
        raise KernelCompilationError(f"{platform} path broken")

    monkeypatch.setattr(NumbaCudaKernel, "emit", broken)
    f = pk.numba_cuda_kernel(double, jax.ShapeDtypeStruct((N,), F32), launch_dims=N)
    with pytest.raises(KernelCompilationError, match="cpu path broken"):
        f(jnp.zeros(N, F32))
